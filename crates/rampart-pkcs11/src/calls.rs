//! What each `C_*` function does, in safe Rust over Rust values: `ffi`
//! reads the caller's pointers into these arguments and writes the
//! results back.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cryptoki_sys::*;
use rampart_crypto::key_formats::named_curve_from_der;
use rampart_crypto::{fill_random, KeyAlg};
use rampart_kmip::enums::{usage_mask, CryptographicAlgorithm};

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
        None => {
            let output = run()?;
            answer.keep(input, output.clone());
            output
        }
    };
    Ok(match room {
        None => Delivery::Length(output.len()),
        Some(room) if room < output.len() => Delivery::TooSmall(output.len()),
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
        CKU_USER => m.slot(slot)?.login(&m, pin),
        // The key manager's administrators do not log in here.
        CKU_SO => Err(Rv(CKR_PIN_INCORRECT)),
        CKU_CONTEXT_SPECIFIC => Err(Rv(CKR_OPERATION_NOT_INITIALIZED)),
        _ => Err(Rv(CKR_USER_TYPE_INVALID)),
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
        let uids = remote::locate(&m, s, find.offset)?;
        find.offset += i32::try_from(uids.len()).unwrap_or(i32::MAX);
        if uids.len() < remote::PAGE as usize {
            find.exhausted = true;
        }
        for info in remote::describe(&m, s, &uids)? {
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
    remote::destroy(&m, m.slot(slot)?, &info)?;
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
    let uid = remote::create_symmetric(&m, s, algorithm, bits, usage, extractable, naming)?;
    m.handle_of(slot, remote::describe_one(&m, s, &uid)?)
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
        &m,
        s,
        spec,
        remote::naming(value_of(&private, CKA_LABEL).or(label), id)?,
        remote::naming(value_of(&public, CKA_LABEL).or(label), id)?,
    )?;
    let infos = remote::describe(&m, s, &[public_uid, private_uid])?;
    let mut handles = Vec::new();
    for info in infos {
        handles.push((info.class, m.handle_of(slot, info)?));
    }
    let find = |class| handles.iter().find(|(c, _)| *c == class).map(|(_, h)| *h);
    Ok((
        find(CKO_PUBLIC_KEY).ok_or(Rv(CKR_DEVICE_ERROR))?,
        find(CKO_PRIVATE_KEY).ok_or(Rv(CKR_DEVICE_ERROR))?,
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
            Step::Update => op.update(&m, s, data),
            Step::Single | Step::Final => op.finish(&m, s, data),
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
            let result = deliver(&mut answer, data, room, || op.sign(&m, s, data));
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
    op.verify(&m, s, data, signature)
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
