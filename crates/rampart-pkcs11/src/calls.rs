//! What each `C_*` function does, in safe Rust over Rust values: `ffi`
//! reads the caller's pointers into these arguments and writes the
//! results back.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cryptoki_sys::*;
use rampart_crypto::key_formats::named_curve_from_der;
use rampart_crypto::{fill_random, KeyAlg};
use rampart_kmip::enums::{usage_mask, CryptographicAlgorithm};
use rampart_kmip::ttlv::{Item, Value};

use crate::mechanisms::{self, Mechanism};
use crate::objects::{AttributeValue, ObjectInfo};
use crate::operations::{Answer, Crypt, Digesting, Signing};
use crate::remote::{self, PairSpec};
use crate::rv::{Result, Rv};
use crate::token::{module, FindState, Module, Session};

/// A template as the caller gave it: each attribute's type and value.
pub(crate) type Template = Vec<(CK_ATTRIBUTE_TYPE, Vec<u8>)>;

/// What a call that returns bytes gives back (the two-call convention).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Delivery {
    Bytes(Vec<u8>),
    /// The caller asked only for the length; the operation goes on.
    Length(usize),
    /// The caller's buffer holds fewer bytes than this; the operation
    /// goes on.
    TooSmall(usize),
}

/// The kept or new output of `input` for a buffer of `room` bytes
/// (`None`: a length query).
fn deliver(
    answer: &mut Answer,
    input: &[u8],
    room: Option<usize>,
    run: impl FnOnce() -> Result<Vec<u8>>,
) -> Result<Delivery> {
    let output = match answer.kept(input) {
        Some(kept) => kept.to_vec(),
        None => run()?,
    };
    // Kept only when the caller must call again: a call with room enough
    // copies nothing more.
    Ok(match room {
        None => {
            let len = output.len();
            answer.keep(input, output);
            Delivery::Length(len)
        }
        Some(room) if room < output.len() => {
            let len = output.len();
            answer.keep(input, output);
            Delivery::TooSmall(len)
        }
        Some(_) => {
            answer.clear();
            Delivery::Bytes(output)
        }
    })
}

/// Whether the operation ends with this delivery.
fn ends(delivery: &Result<Delivery>) -> bool {
    !matches!(delivery, Ok(Delivery::Length(_) | Delivery::TooSmall(_)))
}

fn lock(session: &Mutex<Session>) -> MutexGuard<'_, Session> {
    session.lock().unwrap_or_else(PoisonError::into_inner)
}

fn value_of(template: &Template, kind: CK_ATTRIBUTE_TYPE) -> Option<&[u8]> {
    template.iter().find(|(k, _)| *k == kind).map(|(_, v)| v.as_slice())
}

fn ulong_of(template: &Template, kind: CK_ATTRIBUTE_TYPE) -> Result<Option<CK_ULONG>> {
    value_of(template, kind)
        .map(|v| {
            <[u8; 8]>::try_from(v)
                .map(CK_ULONG::from_ne_bytes)
                .map_err(|_| Rv(CKR_ATTRIBUTE_VALUE_INVALID))
        })
        .transpose()
}

fn bool_of(template: &Template, kind: CK_ATTRIBUTE_TYPE) -> Result<Option<bool>> {
    value_of(template, kind)
        .map(|v| match v {
            [b] => Ok(*b != 0),
            _ => Err(Rv(CKR_ATTRIBUTE_VALUE_INVALID)),
        })
        .transpose()
}

/// The session, its module and slot.
fn open(handle: CK_SESSION_HANDLE) -> Result<(Arc<Module>, Arc<Mutex<Session>>, CK_SLOT_ID)> {
    let m = module()?;
    let session = m.session(handle)?;
    let slot = lock(&session).slot;
    Ok((m, session, slot))
}

/// The key behind `handle`, checked to be usable now.
fn usable_key(m: &Module, slot: CK_SLOT_ID, handle: CK_OBJECT_HANDLE) -> Result<Arc<ObjectInfo>> {
    let key = m.object(slot, handle).map_err(|_| Rv(CKR_KEY_HANDLE_INVALID))?;
    if key.is_private() && !m.slot(slot)?.may_use_private() {
        return Err(Rv(CKR_USER_NOT_LOGGED_IN));
    }
    Ok(key)
}

// ---- sessions and login ----------------------------------------------

pub(crate) fn login(handle: CK_SESSION_HANDLE, user: CK_USER_TYPE, pin: &[u8]) -> Result<()> {
    let (m, _, slot) = open(handle)?;
    match user {
        CKU_USER => {
            let s = m.slot(slot)?;
            s.check_pin(pin)?;
            remote::check_identity(m.remote(s))?;
            s.set_logged_in();
            Ok(())
        }
        // The key manager's administrators do not log in here.
        CKU_SO => Err(Rv(CKR_PIN_INCORRECT)),
        CKU_CONTEXT_SPECIFIC => Err(Rv(CKR_OPERATION_NOT_INITIALIZED)),
        _ => Err(Rv(CKR_USER_TYPE_INVALID)),
    }
}

/// `C_CloseSession`: its session objects are destroyed in the key manager
/// (best effort: one that cannot be destroyed now stays, as a token
/// object would).
pub(crate) fn close_session(handle: CK_SESSION_HANDLE) -> Result<()> {
    let m = module()?;
    let (slot, temporary) = m.close_session(handle)?;
    destroy_temporary(&m, slot, temporary);
    Ok(())
}

/// `C_CloseAllSessions`.
pub(crate) fn close_all_sessions(slot: CK_SLOT_ID) -> Result<()> {
    let m = module()?;
    let temporary = m.close_all_sessions(slot)?;
    destroy_temporary(&m, slot, temporary);
    Ok(())
}

fn destroy_temporary(m: &Module, slot: CK_SLOT_ID, handles: Vec<CK_OBJECT_HANDLE>) {
    let Ok(s) = m.slot(slot) else { return };
    for handle in handles {
        if let Ok(info) = m.object(slot, handle) {
            if remote::destroy(m.remote(s), &info).is_ok() {
                m.forget(handle);
            }
        }
    }
}

pub(crate) fn logout(handle: CK_SESSION_HANDLE) -> Result<()> {
    let (m, _, slot) = open(handle)?;
    m.slot(slot)?.logout()
}

pub(crate) fn session_info(handle: CK_SESSION_HANDLE) -> Result<CK_SESSION_INFO> {
    let (m, session, slot) = open(handle)?;
    let flags = lock(&session).flags;
    let rw = flags & CKF_RW_SESSION != 0;
    let state = match (m.slot(slot)?.is_logged_in(), rw) {
        (true, true) => CKS_RW_USER_FUNCTIONS,
        (true, false) => CKS_RO_USER_FUNCTIONS,
        (false, true) => CKS_RW_PUBLIC_SESSION,
        (false, false) => CKS_RO_PUBLIC_SESSION,
    };
    Ok(CK_SESSION_INFO { slotID: slot, state, flags, ulDeviceError: 0 })
}

// ---- objects ---------------------------------------------------------

pub(crate) fn find_init(handle: CK_SESSION_HANDLE, template: Template) -> Result<()> {
    let (_, session, _) = open(handle)?;
    let mut session = lock(&session);
    if session.find.is_some() {
        return Err(Rv(CKR_OPERATION_ACTIVE));
    }
    session.find =
        Some(FindState { template, offset: 0, found: Default::default(), exhausted: false });
    Ok(())
}

pub(crate) fn find(handle: CK_SESSION_HANDLE, max: usize) -> Result<Vec<CK_OBJECT_HANDLE>> {
    let (m, session, slot) = open(handle)?;
    let s = m.slot(slot)?;
    let private_ok = s.may_use_private();
    let mut session = lock(&session);
    let find = session.find.as_mut().ok_or(Rv(CKR_OPERATION_NOT_INITIALIZED))?;
    while find.found.len() < max && !find.exhausted {
        let uids = remote::locate(m.remote(s), find.offset)?;
        find.offset += i32::try_from(uids.len()).unwrap_or(i32::MAX);
        if uids.len() < remote::PAGE as usize {
            find.exhausted = true;
        }
        for info in remote::describe(m.remote(s), &uids)? {
            if (private_ok || !info.is_private()) && info.matches(&find.template) {
                find.found.push_back(m.handle_of(slot, info)?);
            }
        }
    }
    let n = max.min(find.found.len());
    Ok(find.found.drain(..n).collect())
}

pub(crate) fn find_final(handle: CK_SESSION_HANDLE) -> Result<()> {
    let (_, session, _) = open(handle)?;
    let ended = lock(&session).find.take();
    ended.map(|_| ()).ok_or(Rv(CKR_OPERATION_NOT_INITIALIZED))
}

pub(crate) fn attributes(
    handle: CK_SESSION_HANDLE,
    object: CK_OBJECT_HANDLE,
    kinds: &[CK_ATTRIBUTE_TYPE],
) -> Result<Vec<AttributeValue>> {
    let (m, _, slot) = open(handle)?;
    let info = m.object(slot, object)?;
    if info.is_private() && !m.slot(slot)?.may_use_private() {
        return Err(Rv(CKR_OBJECT_HANDLE_INVALID));
    }
    Ok(kinds.iter().map(|k| info.attribute(*k)).collect())
}

pub(crate) fn destroy_object(handle: CK_SESSION_HANDLE, object: CK_OBJECT_HANDLE) -> Result<()> {
    let (m, session, slot) = open(handle)?;
    if lock(&session).flags & CKF_RW_SESSION == 0 {
        return Err(Rv(CKR_SESSION_READ_ONLY));
    }
    let info = m.object(slot, object)?;
    if info.is_private() && !m.slot(slot)?.may_use_private() {
        return Err(Rv(CKR_USER_NOT_LOGGED_IN));
    }
    remote::destroy(m.remote(m.slot(slot)?), &info)?;
    m.forget(object);
    Ok(())
}

// ---- key generation --------------------------------------------------

/// The class a template names must be `class` when it names one.
fn check_class(template: &Template, class: CK_OBJECT_CLASS) -> Result<()> {
    match ulong_of(template, CKA_CLASS)? {
        Some(c) if c != class => Err(Rv(CKR_TEMPLATE_INCONSISTENT)),
        _ => Ok(()),
    }
}

fn check_writable(m: &Module, session: &Mutex<Session>, slot: CK_SLOT_ID) -> Result<()> {
    if lock(session).flags & CKF_RW_SESSION == 0 {
        return Err(Rv(CKR_SESSION_READ_ONLY));
    }
    if !m.slot(slot)?.may_use_private() {
        return Err(Rv(CKR_USER_NOT_LOGGED_IN));
    }
    Ok(())
}

pub(crate) fn generate_key(
    handle: CK_SESSION_HANDLE,
    mechanism: Mechanism,
    template: Template,
) -> Result<CK_OBJECT_HANDLE> {
    let (m, session, slot) = open(handle)?;
    check_writable(&m, &session, slot)?;
    check_class(&template, CKO_SECRET_KEY)?;
    let (algorithm, key_type, default_len) = match mechanism {
        Mechanism::AesKeyGen => (CryptographicAlgorithm::AES, CKK_AES, None),
        Mechanism::GenericSecretKeyGen => {
            (CryptographicAlgorithm::HMAC_SHA256, CKK_GENERIC_SECRET, Some(32))
        }
        _ => return Err(Rv(CKR_MECHANISM_INVALID)),
    };
    if ulong_of(&template, CKA_KEY_TYPE)?.is_some_and(|t| t != key_type) {
        return Err(Rv(CKR_TEMPLATE_INCONSISTENT));
    }
    let len =
        ulong_of(&template, CKA_VALUE_LEN)?.or(default_len).ok_or(Rv(CKR_TEMPLATE_INCOMPLETE))?;
    let valid = match mechanism {
        Mechanism::AesKeyGen => matches!(len, 16 | 24 | 32),
        _ => (16..=64).contains(&len),
    };
    if !valid {
        return Err(Rv(CKR_ATTRIBUTE_VALUE_INVALID));
    }
    let mut usage = remote::usage_from(&flags(
        &template,
        &[CKA_ENCRYPT, CKA_DECRYPT, CKA_SIGN, CKA_VERIFY, CKA_WRAP, CKA_UNWRAP, CKA_DERIVE],
    )?);
    if usage == 0 {
        // PKCS#11 leaves the defaults to the token: what the key type is for.
        usage = match mechanism {
            Mechanism::AesKeyGen => {
                usage_mask::ENCRYPT
                    | usage_mask::DECRYPT
                    | usage_mask::WRAP_KEY
                    | usage_mask::UNWRAP_KEY
            }
            _ => usage_mask::MAC_GENERATE | usage_mask::MAC_VERIFY,
        };
    }
    if matches!(mechanism, Mechanism::GenericSecretKeyGen) {
        usage &= !(usage_mask::SIGN | usage_mask::VERIFY);
    }
    let extractable = bool_of(&template, CKA_EXTRACTABLE)?.unwrap_or(false);
    if bool_of(&template, CKA_SENSITIVE)? == Some(false) {
        // Secret keys stay in the key manager: never readable here.
        return Err(Rv(CKR_ATTRIBUTE_VALUE_INVALID));
    }
    let naming = remote::naming(value_of(&template, CKA_LABEL), value_of(&template, CKA_ID))?;
    let bits = i32::try_from(len * 8).map_err(|_| Rv(CKR_ATTRIBUTE_VALUE_INVALID))?;
    let s = m.slot(slot)?;
    let uid = remote::create_symmetric(m.remote(s), algorithm, bits, usage, extractable, naming)?;
    keep(&m, &session, slot, &template, &uid)
}

/// The boolean attributes among `kinds` that the template sets.
fn flags(
    template: &Template,
    kinds: &[CK_ATTRIBUTE_TYPE],
) -> Result<Vec<(CK_ATTRIBUTE_TYPE, bool)>> {
    let mut out = Vec::new();
    for kind in kinds {
        if let Some(on) = bool_of(template, *kind)? {
            out.push((*kind, on));
        }
    }
    Ok(out)
}

pub(crate) fn generate_key_pair(
    handle: CK_SESSION_HANDLE,
    mechanism: Mechanism,
    public: Template,
    private: Template,
) -> Result<(CK_OBJECT_HANDLE, CK_OBJECT_HANDLE)> {
    let (m, session, slot) = open(handle)?;
    check_writable(&m, &session, slot)?;
    check_class(&public, CKO_PUBLIC_KEY)?;
    check_class(&private, CKO_PRIVATE_KEY)?;
    let (algorithm, length) = match mechanism {
        Mechanism::RsaKeyPairGen => {
            let bits = ulong_of(&public, CKA_MODULUS_BITS)?.ok_or(Rv(CKR_TEMPLATE_INCOMPLETE))?;
            if !matches!(bits, 2048 | 3072 | 4096) {
                return Err(Rv(CKR_ATTRIBUTE_VALUE_INVALID));
            }
            // The key manager makes keys with e = 65537 only.
            if let Some(e) = value_of(&public, CKA_PUBLIC_EXPONENT) {
                let trimmed = &e[e.iter().take_while(|b| **b == 0).count()..];
                if trimmed != [1, 0, 1] {
                    return Err(Rv(CKR_ATTRIBUTE_VALUE_INVALID));
                }
            }
            (CryptographicAlgorithm::RSA, bits as i32)
        }
        Mechanism::EcKeyPairGen | Mechanism::EdwardsKeyPairGen => {
            let params = value_of(&public, CKA_EC_PARAMS).ok_or(Rv(CKR_TEMPLATE_INCOMPLETE))?;
            match (named_curve_from_der(params), &mechanism) {
                (Ok(KeyAlg::Ec(curve)), Mechanism::EcKeyPairGen) => {
                    (CryptographicAlgorithm::EC, curve.bits() as i32)
                }
                (Ok(KeyAlg::Ed25519), Mechanism::EdwardsKeyPairGen) => {
                    (CryptographicAlgorithm::ED25519, 256)
                }
                (Ok(_), _) => return Err(Rv(CKR_TEMPLATE_INCONSISTENT)),
                (Err(_), _) => return Err(Rv(CKR_CURVE_NOT_SUPPORTED)),
            }
        }
        _ => return Err(Rv(CKR_MECHANISM_INVALID)),
    };
    let rsa = algorithm == CryptographicAlgorithm::RSA;
    let mut private_usage =
        remote::usage_from(&flags(&private, &[CKA_SIGN, CKA_DECRYPT, CKA_UNWRAP, CKA_DERIVE])?);
    let mut public_usage =
        remote::usage_from(&flags(&public, &[CKA_VERIFY, CKA_ENCRYPT, CKA_WRAP])?);
    // HMAC bits that usage_from adds for CKA_SIGN/VERIFY mean nothing here.
    private_usage &= !usage_mask::MAC_GENERATE;
    public_usage &= !usage_mask::MAC_VERIFY;
    if private_usage == 0 {
        private_usage = usage_mask::SIGN | if rsa { usage_mask::DECRYPT } else { 0 };
    }
    if public_usage == 0 {
        public_usage = usage_mask::VERIFY | if rsa { usage_mask::ENCRYPT } else { 0 };
    }
    if bool_of(&private, CKA_SENSITIVE)? == Some(false) {
        return Err(Rv(CKR_ATTRIBUTE_VALUE_INVALID));
    }
    let spec = PairSpec {
        algorithm,
        length,
        private_usage,
        public_usage,
        extractable: bool_of(&private, CKA_EXTRACTABLE)?.unwrap_or(false),
    };
    // A label or ID given for one key only is the pair's.
    let label = value_of(&private, CKA_LABEL).or(value_of(&public, CKA_LABEL));
    let id = value_of(&private, CKA_ID).or(value_of(&public, CKA_ID));
    let s = m.slot(slot)?;
    let (private_uid, public_uid) = remote::create_key_pair(
        m.remote(s),
        spec,
        remote::naming(value_of(&private, CKA_LABEL).or(label), id)?,
        remote::naming(value_of(&public, CKA_LABEL).or(label), id)?,
    )?;
    Ok((
        keep(&m, &session, slot, &public, &public_uid)?,
        keep(&m, &session, slot, &private, &private_uid)?,
    ))
}

// ---- encryption ------------------------------------------------------

pub(crate) fn crypt_init(
    handle: CK_SESSION_HANDLE,
    mechanism: Mechanism,
    key: CK_OBJECT_HANDLE,
    encrypt: bool,
) -> Result<()> {
    let (m, session, slot) = open(handle)?;
    let key = usable_key(&m, slot, key)?;
    let mut session = lock(&session);
    let place =
        if encrypt { &mut session.operations.encrypt } else { &mut session.operations.decrypt };
    if place.is_some() {
        return Err(Rv(CKR_OPERATION_ACTIVE));
    }
    *place = Some(Crypt::new(key, mechanism, encrypt)?);
    Ok(())
}

/// `C_Encrypt`/`C_Decrypt` (`last`) or their Update (`!last`), and
/// their Final (`last` with no data, `single` false).
pub(crate) fn crypt(
    handle: CK_SESSION_HANDLE,
    encrypt: bool,
    step: Step,
    data: &[u8],
    room: Option<usize>,
) -> Result<Delivery> {
    let (m, session, slot) = open(handle)?;
    let s = m.slot(slot)?;
    let mut session = lock(&session);
    let place =
        if encrypt { &mut session.operations.encrypt } else { &mut session.operations.decrypt };
    let op = place.as_mut().ok_or(Rv(CKR_OPERATION_NOT_INITIALIZED))?;
    let delivery = {
        let mut answer = std::mem::take(&mut op.answer);
        let result = deliver(&mut answer, data, room, || match step {
            Step::Update => op.update(m.remote(s), data),
            Step::Single | Step::Final => op.finish(m.remote(s), data),
        });
        op.answer = answer;
        result
    };
    if step != Step::Update && ends(&delivery) || delivery.is_err() {
        *place = None;
    }
    delivery
}

/// Which call of a multi-part operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Single,
    Update,
    Final,
}

// ---- signatures and MACs ---------------------------------------------

pub(crate) fn sign_init(
    handle: CK_SESSION_HANDLE,
    mechanism: Mechanism,
    key: CK_OBJECT_HANDLE,
    sign: bool,
) -> Result<()> {
    let (m, session, slot) = open(handle)?;
    let key = usable_key(&m, slot, key)?;
    let mut session = lock(&session);
    let place = if sign { &mut session.operations.sign } else { &mut session.operations.verify };
    if place.is_some() {
        return Err(Rv(CKR_OPERATION_ACTIVE));
    }
    *place = Some(Signing::new(key, mechanism, sign)?);
    Ok(())
}

pub(crate) fn sign_update(handle: CK_SESSION_HANDLE, sign: bool, data: &[u8]) -> Result<()> {
    let (_, session, _) = open(handle)?;
    let mut session = lock(&session);
    let place = if sign { &mut session.operations.sign } else { &mut session.operations.verify };
    let op = place.as_mut().ok_or(Rv(CKR_OPERATION_NOT_INITIALIZED))?;
    let result = op.update(data);
    if result.is_err() {
        *place = None;
    }
    result
}

pub(crate) fn sign(
    handle: CK_SESSION_HANDLE,
    step: Step,
    data: &[u8],
    room: Option<usize>,
) -> Result<Delivery> {
    let (m, session, slot) = open(handle)?;
    let s = m.slot(slot)?;
    let mut session = lock(&session);
    let place = &mut session.operations.sign;
    let op = place.as_mut().ok_or(Rv(CKR_OPERATION_NOT_INITIALIZED))?;
    if step == Step::Single && op.was_updated() {
        *place = None;
        return Err(Rv(CKR_OPERATION_ACTIVE));
    }
    // A length query needs no signature when the length is known.
    let delivery = match (room, op.output_len()) {
        (None, Some(len)) if op.answer.kept(data).is_none() => Ok(Delivery::Length(len)),
        _ => {
            let mut answer = std::mem::take(&mut op.answer);
            let result = deliver(&mut answer, data, room, || op.sign(m.remote(s), data));
            op.answer = answer;
            result
        }
    };
    if ends(&delivery) {
        *place = None;
    }
    delivery
}

pub(crate) fn verify(
    handle: CK_SESSION_HANDLE,
    step: Step,
    data: &[u8],
    signature: &[u8],
) -> Result<()> {
    let (m, session, slot) = open(handle)?;
    let s = m.slot(slot)?;
    let mut session = lock(&session);
    let mut op = session.operations.verify.take().ok_or(Rv(CKR_OPERATION_NOT_INITIALIZED))?;
    if step == Step::Single && op.was_updated() {
        return Err(Rv(CKR_OPERATION_ACTIVE));
    }
    op.verify(m.remote(s), data, signature)
}

// ---- digests and random data (local) ---------------------------------

pub(crate) fn digest_init(handle: CK_SESSION_HANDLE, mechanism: Mechanism) -> Result<()> {
    let (_, session, _) = open(handle)?;
    let mut session = lock(&session);
    if session.operations.digest.is_some() {
        return Err(Rv(CKR_OPERATION_ACTIVE));
    }
    let Mechanism::Digest(alg) = mechanism else { return Err(Rv(CKR_MECHANISM_INVALID)) };
    session.operations.digest = Some(Digesting::new(alg));
    Ok(())
}

pub(crate) fn digest_update(handle: CK_SESSION_HANDLE, data: &[u8]) -> Result<()> {
    let (_, session, _) = open(handle)?;
    let mut session = lock(&session);
    session.operations.digest.as_mut().ok_or(Rv(CKR_OPERATION_NOT_INITIALIZED))?.update(data);
    Ok(())
}

pub(crate) fn digest(
    handle: CK_SESSION_HANDLE,
    data: &[u8],
    room: Option<usize>,
) -> Result<Delivery> {
    let (_, session, _) = open(handle)?;
    let mut session = lock(&session);
    let place = &mut session.operations.digest;
    let op = place.as_mut().ok_or(Rv(CKR_OPERATION_NOT_INITIALIZED))?;
    let len = op.len();
    let delivery = match room {
        None => Ok(Delivery::Length(len)),
        Some(r) if r < len => Ok(Delivery::TooSmall(len)),
        Some(_) => Ok(Delivery::Bytes(op.finish(data))),
    };
    if ends(&delivery) {
        *place = None;
    }
    delivery
}

pub(crate) fn generate_random(handle: CK_SESSION_HANDLE, out: &mut [u8]) -> Result<()> {
    open(handle)?;
    fill_random(out).map_err(|_| Rv(CKR_FUNCTION_FAILED))
}

// ---- information -----------------------------------------------------

pub(crate) fn mechanism_list(slot: CK_SLOT_ID) -> Result<Vec<CK_MECHANISM_TYPE>> {
    module()?.slot(slot)?;
    Ok(mechanisms::MECHANISMS.iter().map(|m| m.0).collect())
}

pub(crate) fn mechanism_info(
    slot: CK_SLOT_ID,
    kind: CK_MECHANISM_TYPE,
) -> Result<CK_MECHANISM_INFO> {
    module()?.slot(slot)?;
    let (min, max, flags) = mechanisms::info(kind).ok_or(Rv(CKR_MECHANISM_INVALID))?;
    Ok(CK_MECHANISM_INFO { ulMinKeySize: min, ulMaxKeySize: max, flags })
}

// ---- objects made from values, and key wrapping ----------------------

/// The KMIP algorithm and length of a symmetric key of `key_type` and
/// `len` bytes.
fn symmetric_algorithm(key_type: CK_KEY_TYPE, len: usize) -> Result<(CryptographicAlgorithm, i32)> {
    let valid = match key_type {
        CKK_AES => matches!(len, 16 | 24 | 32),
        CKK_GENERIC_SECRET | CKK_SHA256_HMAC => (16..=64).contains(&len),
        _ => return Err(Rv(CKR_TEMPLATE_INCONSISTENT)),
    };
    if !valid {
        return Err(Rv(CKR_ATTRIBUTE_VALUE_INVALID));
    }
    let algorithm = if key_type == CKK_AES {
        CryptographicAlgorithm::AES
    } else {
        CryptographicAlgorithm::HMAC_SHA256
    };
    Ok((algorithm, (len * 8) as i32))
}

/// The usage mask and extractability a secret key made from `template`
/// (created or unwrapped) gets.
fn secret_key_attributes(template: &Template, key_type: CK_KEY_TYPE) -> Result<Vec<Item>> {
    let mut usage = remote::usage_from(&flags(
        template,
        &[CKA_ENCRYPT, CKA_DECRYPT, CKA_SIGN, CKA_VERIFY, CKA_WRAP, CKA_UNWRAP, CKA_DERIVE],
    )?);
    if usage == 0 {
        usage = if key_type == CKK_AES {
            usage_mask::ENCRYPT
                | usage_mask::DECRYPT
                | usage_mask::WRAP_KEY
                | usage_mask::UNWRAP_KEY
        } else {
            usage_mask::MAC_GENERATE | usage_mask::MAC_VERIFY
        };
    }
    if key_type != CKK_AES {
        usage &= !(usage_mask::SIGN | usage_mask::VERIFY);
    } else {
        usage &= !(usage_mask::MAC_GENERATE | usage_mask::MAC_VERIFY);
    }
    let extractable = bool_of(template, CKA_EXTRACTABLE)?.unwrap_or(false);
    Ok(vec![
        attribute("Cryptographic Usage Mask", Value::Integer(usage)),
        attribute("Extractable", Value::Boolean(extractable)),
    ])
}

fn custom(
    template: &Template,
    extra: Vec<rampart_kmip::ttlv::Item>,
) -> Result<Vec<rampart_kmip::ttlv::Item>> {
    let mut attributes = remote::naming(value_of(template, CKA_LABEL), value_of(template, CKA_ID))?;
    attributes.extend(extra);
    Ok(attributes)
}

fn attribute(name: &str, value: rampart_kmip::ttlv::Value) -> rampart_kmip::ttlv::Item {
    rampart_kmip::message::Attribute::new(name, value).to_item()
}

/// Keeps a new object's handle, and remembers it in the session when it
/// is a session object (the template does not set `CKA_TOKEN`): those
/// are destroyed when the session closes.
fn keep(
    m: &Module,
    session: &Mutex<Session>,
    slot: CK_SLOT_ID,
    template: &Template,
    uid: &str,
) -> Result<CK_OBJECT_HANDLE> {
    let mut info = remote::describe_one(m.remote(m.slot(slot)?), uid)?;
    // CKA_TOKEN is false unless the template says otherwise (PKCS#11 3.0
    // §4.2).
    let temporary = bool_of(template, CKA_TOKEN)? != Some(true);
    info.token = !temporary;
    let handle = m.handle_of(slot, info)?;
    if temporary {
        lock(session).temporary.push(handle);
    }
    Ok(handle)
}

pub(crate) fn create_object(
    handle: CK_SESSION_HANDLE,
    template: Template,
) -> Result<CK_OBJECT_HANDLE> {
    use crate::rv::Context;
    use rampart_crypto::key_formats::{
        ec_private_pkcs8, ec_public_spki, ed25519_private_pkcs8, rsa_private_pkcs8_from_parts,
        rsa_public_spki, RsaPrivateParts,
    };
    use rampart_kmip::enums::{KeyFormatType, ObjectType};
    use rampart_kmip::tag::Tag;
    let (m, session, slot) = open(handle)?;
    if lock(&session).flags & CKF_RW_SESSION == 0 {
        return Err(Rv(CKR_SESSION_READ_ONLY));
    }
    let class = ulong_of(&template, CKA_CLASS)?.ok_or(Rv(CKR_TEMPLATE_INCOMPLETE))?;
    let s = m.slot(slot)?;
    if matches!(class, CKO_SECRET_KEY | CKO_PRIVATE_KEY) && !s.may_use_private() {
        return Err(Rv(CKR_USER_NOT_LOGGED_IN));
    }
    let required = |kind| value_of(&template, kind).ok_or(Rv(CKR_TEMPLATE_INCOMPLETE));
    let secret = |kind| required(kind).map(rampart_crypto::SecretBytes::from_slice);
    let key_type = ulong_of(&template, CKA_KEY_TYPE)?;
    let extractable = attribute(
        "Extractable",
        Value::Boolean(bool_of(&template, CKA_EXTRACTABLE)?.unwrap_or(false)),
    );
    // Each class gives its KMIP object type, the object and its
    // attributes; one Register sends them.
    let usage = |allowed: &[CK_ATTRIBUTE_TYPE], dropped: i32, default: i32| -> Result<Item> {
        let usage = remote::usage_from(&flags(&template, allowed)?) & !dropped;
        let usage = if usage == 0 { default } else { usage };
        Ok(attribute("Cryptographic Usage Mask", Value::Integer(usage)))
    };
    let key =
        |tag: Tag, format, material: &[u8], algorithm: Option<(CryptographicAlgorithm, i32)>| {
            let (algorithm, bits) = algorithm.unzip();
            Item::structure(tag, vec![remote::key_block(format, material, algorithm, bits, None)])
        };
    let (object_type, object, attributes, context) = match class {
        CKO_CERTIFICATE => {
            if ulong_of(&template, CKA_CERTIFICATE_TYPE)?.is_some_and(|t| t != CKC_X_509) {
                return Err(Rv(CKR_ATTRIBUTE_VALUE_INVALID));
            }
            let der = required(CKA_VALUE)?;
            rampart_crypto::signature_formats::certificate_names(der)
                .map_err(|_| Rv(CKR_ATTRIBUTE_VALUE_INVALID))?;
            let certificate = rampart_kmip::object_parts::Certificate {
                certificate_type: rampart_kmip::enums::CertificateType::X509,
                value: der.into(),
            };
            (ObjectType::CERTIFICATE, certificate.to_item(), Vec::new(), Context::Objects)
        }
        CKO_SECRET_KEY => {
            let key_type = key_type.ok_or(Rv(CKR_TEMPLATE_INCOMPLETE))?;
            let value = secret(CKA_VALUE)?;
            let algorithm = symmetric_algorithm(key_type, value.len())?;
            let object =
                key(Tag::SYMMETRIC_KEY, KeyFormatType::RAW, value.expose(), Some(algorithm));
            let attributes = secret_key_attributes(&template, key_type)?;
            (ObjectType::SYMMETRIC_KEY, object, attributes, Context::Generate)
        }
        CKO_PRIVATE_KEY => {
            let pkcs8 = match key_type.ok_or(Rv(CKR_TEMPLATE_INCOMPLETE))? {
                CKK_RSA => rsa_private_pkcs8_from_parts(&RsaPrivateParts {
                    modulus: required(CKA_MODULUS)?.to_vec(),
                    public_exponent: required(CKA_PUBLIC_EXPONENT)?.to_vec(),
                    private_exponent: secret(CKA_PRIVATE_EXPONENT)?,
                    p: secret(CKA_PRIME_1)?,
                    q: secret(CKA_PRIME_2)?,
                    prime_exponent_p: secret(CKA_EXPONENT_1)?,
                    prime_exponent_q: secret(CKA_EXPONENT_2)?,
                    crt_coefficient: secret(CKA_COEFFICIENT)?,
                }),
                CKK_EC | CKK_EC_EDWARDS => match named_curve_from_der(required(CKA_EC_PARAMS)?) {
                    Ok(KeyAlg::Ec(curve)) => ec_private_pkcs8(curve, secret(CKA_VALUE)?.expose()),
                    Ok(KeyAlg::Ed25519) => ed25519_private_pkcs8(secret(CKA_VALUE)?.expose()),
                    _ => return Err(Rv(CKR_CURVE_NOT_SUPPORTED)),
                },
                _ => return Err(Rv(CKR_TEMPLATE_INCONSISTENT)),
            }
            .map_err(|_| Rv(CKR_ATTRIBUTE_VALUE_INVALID))?;
            let usage = usage(
                &[CKA_SIGN, CKA_DECRYPT, CKA_UNWRAP, CKA_DERIVE],
                usage_mask::MAC_GENERATE,
                usage_mask::SIGN,
            )?;
            let object = key(Tag::PRIVATE_KEY, KeyFormatType::PKCS8, pkcs8.expose(), None);
            (ObjectType::PRIVATE_KEY, object, vec![usage, extractable], Context::Generate)
        }
        CKO_PUBLIC_KEY => {
            let spki = match key_type.ok_or(Rv(CKR_TEMPLATE_INCOMPLETE))? {
                CKK_RSA => rsa_public_spki(required(CKA_MODULUS)?, required(CKA_PUBLIC_EXPONENT)?),
                CKK_EC | CKK_EC_EDWARDS => {
                    let kind = named_curve_from_der(required(CKA_EC_PARAMS)?)
                        .map_err(|_| Rv(CKR_CURVE_NOT_SUPPORTED))?;
                    // CKA_EC_POINT is the DER of an OCTET STRING; some
                    // applications give the bare point.
                    let point = required(CKA_EC_POINT)?;
                    let bare = match point {
                        [0x04, len, rest @ ..] if usize::from(*len) == rest.len() => rest,
                        [0x04, 0x81, len, rest @ ..] if usize::from(*len) == rest.len() => rest,
                        other => other,
                    };
                    ec_public_spki(kind, bare)
                }
                _ => return Err(Rv(CKR_TEMPLATE_INCONSISTENT)),
            }
            .map_err(|_| Rv(CKR_ATTRIBUTE_VALUE_INVALID))?;
            let usage = usage(
                &[CKA_VERIFY, CKA_ENCRYPT, CKA_WRAP],
                usage_mask::MAC_VERIFY,
                usage_mask::VERIFY,
            )?;
            let object = key(Tag::PUBLIC_KEY, KeyFormatType::X509, &spki, None);
            (ObjectType::PUBLIC_KEY, object, vec![usage], Context::Generate)
        }
        _ => return Err(Rv(CKR_ATTRIBUTE_VALUE_INVALID)),
    };
    let uid = remote::register(
        m.remote(s),
        object_type,
        object,
        custom(&template, attributes)?,
        context,
    )?;
    keep(&m, &session, slot, &template, &uid)
}

/// The AES key wrap of a wrapping mechanism.
fn wrap_mode(mechanism: &Mechanism) -> Result<rampart_kmip::enums::BlockCipherMode> {
    use rampart_kmip::enums::BlockCipherMode;
    match mechanism {
        Mechanism::AesKeyWrap => Ok(BlockCipherMode::NIST_KEY_WRAP),
        Mechanism::AesKeyWrapPad => Ok(BlockCipherMode::AES_KEY_WRAP_PADDING),
        _ => Err(Rv(CKR_MECHANISM_INVALID)),
    }
}

pub(crate) fn wrap_key(
    handle: CK_SESSION_HANDLE,
    mechanism: Mechanism,
    wrapping: CK_OBJECT_HANDLE,
    key: CK_OBJECT_HANDLE,
    room: Option<usize>,
) -> Result<Delivery> {
    let (m, _, slot) = open(handle)?;
    let mode = wrap_mode(&mechanism)?;
    let wrapping =
        usable_key(&m, slot, wrapping).map_err(|_| Rv(CKR_WRAPPING_KEY_HANDLE_INVALID))?;
    if wrapping.key != Some(crate::objects::KeyKind::Aes) {
        return Err(Rv(CKR_WRAPPING_KEY_TYPE_INCONSISTENT));
    }
    let key = usable_key(&m, slot, key)?;
    if key.class != CKO_SECRET_KEY {
        return Err(Rv(CKR_KEY_NOT_WRAPPABLE));
    }
    if !key.extractable {
        return Err(Rv(CKR_KEY_UNEXTRACTABLE));
    }
    // The wrapped length is known without asking: RFC 3394 adds 8 bytes,
    // RFC 5649 pads to 8 and adds 8.
    let len = key.bits.unwrap_or(0) as usize / 8;
    let wrapped_len = match mechanism {
        Mechanism::AesKeyWrap => len + 8,
        _ => len.div_ceil(8) * 8 + 8,
    };
    match room {
        None => return Ok(Delivery::Length(wrapped_len)),
        Some(r) if r < wrapped_len => return Ok(Delivery::TooSmall(wrapped_len)),
        Some(_) => {}
    }
    remote::wrap(m.remote(m.slot(slot)?), &key.uid, &wrapping.uid, mode).map(Delivery::Bytes)
}

pub(crate) fn unwrap_key(
    handle: CK_SESSION_HANDLE,
    mechanism: Mechanism,
    unwrapping: CK_OBJECT_HANDLE,
    wrapped: &[u8],
    template: Template,
) -> Result<CK_OBJECT_HANDLE> {
    use rampart_kmip::enums::{KeyFormatType, ObjectType};
    let (m, session, slot) = open(handle)?;
    check_writable(&m, &session, slot)?;
    let mode = wrap_mode(&mechanism)?;
    let unwrapping =
        usable_key(&m, slot, unwrapping).map_err(|_| Rv(CKR_UNWRAPPING_KEY_HANDLE_INVALID))?;
    if unwrapping.key != Some(crate::objects::KeyKind::Aes) {
        return Err(Rv(CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT));
    }
    check_class(&template, CKO_SECRET_KEY)?;
    let key_type = ulong_of(&template, CKA_KEY_TYPE)?.ok_or(Rv(CKR_TEMPLATE_INCOMPLETE))?;
    // RFC 3394 output is the key plus 8 bytes; RFC 5649's may be padded,
    // so its length comes from the template.
    let len = match (mode, ulong_of(&template, CKA_VALUE_LEN)?) {
        (_, Some(len)) => len as usize,
        (rampart_kmip::enums::BlockCipherMode::NIST_KEY_WRAP, None) => {
            wrapped.len().checked_sub(8).ok_or(Rv(CKR_WRAPPED_KEY_LEN_RANGE))?
        }
        _ => return Err(Rv(CKR_TEMPLATE_INCOMPLETE)),
    };
    let (algorithm, bits) = symmetric_algorithm(key_type, len)?;
    let block = remote::key_block(
        KeyFormatType::RAW,
        wrapped,
        Some(algorithm),
        Some(bits),
        Some((&unwrapping.uid, mode)),
    );
    let attributes = custom(&template, secret_key_attributes(&template, key_type)?)?;
    let uid = remote::register(
        m.remote(m.slot(slot)?),
        ObjectType::SYMMETRIC_KEY,
        rampart_kmip::ttlv::Item::structure(rampart_kmip::tag::Tag::SYMMETRIC_KEY, vec![block]),
        attributes,
        crate::rv::Context::Decrypt,
    )?;
    keep(&m, &session, slot, &template, &uid)
}
