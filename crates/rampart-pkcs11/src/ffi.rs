//! The C ABI of PKCS#11 3.0 (OASIS pkcs11.h): `C_GetFunctionList`,
//! `C_GetInterfaceList`, `C_GetInterface` and every `C_*` function, each
//! also exported by name.
//!
//! Each function reads the caller's pointers into Rust values (a NULL
//! pointer where one is required is `CKR_ARGUMENTS_BAD`; a template or
//! parameter is copied and bounded), calls `calls`, and writes the
//! results back with PKCS#11's two-call convention for lengths. No panic
//! crosses into C: each body runs under `catch_unwind`, and a panic is
//! `CKR_GENERAL_ERROR`.
//!
//! The caller's promises that make this sound are PKCS#11's: every
//! pointer it passes is NULL or valid for the length it gives beside it,
//! and output buffers are writable for the length it says they have.
//! This is the only `unsafe` of the crate.
#![allow(unsafe_code)]
#![allow(non_snake_case)]

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use cryptoki_sys::*;

use crate::calls::{self, Delivery, Step, Template};
use crate::mechanisms::{digest_of_mechanism, digest_of_mgf, Mechanism};
use crate::objects::AttributeValue;
use crate::rv::{Result, Rv};
use crate::token;

/// Most attributes read from one template.
const MAX_TEMPLATE: CK_ULONG = 256;
/// Longest attribute value read from a template (a certificate fits).
const MAX_VALUE: CK_ULONG = 64 * 1024;
/// Longest data a call reads (a little over the key manager's limit, so
/// the limit is what refuses it, with its own return code).
const MAX_INPUT: CK_ULONG = 1 << 21;

fn guard(body: impl FnOnce() -> Result<()>) -> CK_RV {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => CKR_OK,
        Ok(Err(Rv(code))) => code,
        Err(_) => CKR_GENERAL_ERROR,
    }
}

fn bad() -> Rv {
    Rv(CKR_ARGUMENTS_BAD)
}

/// `len` bytes at `ptr` (NULL only with `len` 0).
///
/// # Safety
/// `ptr` is NULL or valid for reads of `len` bytes for `'a`.
unsafe fn input<'a>(ptr: *const CK_BYTE, len: CK_ULONG) -> Result<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() || len > MAX_INPUT {
        return Err(if ptr.is_null() { bad() } else { Rv(CKR_DATA_LEN_RANGE) });
    }
    // SAFETY: non-NULL and, by the caller's promise, valid for `len`
    // bytes; `len` is bounded above.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len as usize) })
}

/// Writes `value` through `out` (which must not be NULL).
///
/// # Safety
/// `out` is NULL or valid for a write of `T`.
unsafe fn put<T>(out: *mut T, value: T) -> Result<()> {
    if out.is_null() {
        return Err(bad());
    }
    // SAFETY: non-NULL and writable by the caller's promise.
    unsafe { out.write(value) };
    Ok(())
}

/// The room of an output buffer: `None` when `out` is NULL (a length
/// query).
///
/// # Safety
/// `len` is NULL or valid for reads; `out` is NULL or any pointer.
unsafe fn room(out: *const CK_BYTE, len: *const CK_ULONG) -> Result<Option<usize>> {
    if len.is_null() {
        return Err(bad());
    }
    // SAFETY: non-NULL and readable by the caller's promise.
    let len = unsafe { len.read() };
    Ok((!out.is_null()).then(|| usize::try_from(len).unwrap_or(usize::MAX)))
}

/// Writes a delivery back: the bytes and their length, or the length
/// needed (with `CKR_BUFFER_TOO_SMALL` when the buffer was short).
///
/// # Safety
/// `len` is valid for writes; when `delivery` is `Bytes`, `out` is valid
/// for writes of as many bytes as `room` said.
unsafe fn deliver(delivery: Delivery, out: *mut CK_BYTE, len: *mut CK_ULONG) -> Result<()> {
    match delivery {
        // SAFETY: `len` was read by `room`, so it is valid; the caller
        // said `out` holds at least this many bytes (checked by `calls`).
        Delivery::Bytes(bytes) => unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out, bytes.len());
            put(len, bytes.len() as CK_ULONG)
        },
        // SAFETY: as above.
        Delivery::Length(n) => unsafe { put(len, n as CK_ULONG) },
        Delivery::TooSmall(n) => {
            // SAFETY: as above.
            unsafe { put(len, n as CK_ULONG)? };
            Err(Rv(CKR_BUFFER_TOO_SMALL))
        }
    }
}

/// A template's attributes and values, copied.
///
/// # Safety
/// `template` is NULL or valid for `count` attributes, each value NULL or
/// valid for its length.
unsafe fn template(template: *const CK_ATTRIBUTE, count: CK_ULONG) -> Result<Template> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if template.is_null() || count > MAX_TEMPLATE {
        return Err(if template.is_null() { bad() } else { Rv(CKR_TEMPLATE_INCONSISTENT) });
    }
    // SAFETY: non-NULL, valid for `count` (bounded) attributes.
    let attributes = unsafe { std::slice::from_raw_parts(template, count as usize) };
    let mut out = Vec::with_capacity(attributes.len());
    for a in attributes {
        if a.ulValueLen > MAX_VALUE {
            return Err(Rv(CKR_ATTRIBUTE_VALUE_INVALID));
        }
        // SAFETY: the value is valid for its length by the caller's promise.
        let value = unsafe { input(a.pValue as *const CK_BYTE, a.ulValueLen) }
            .map_err(|_| Rv(CKR_ATTRIBUTE_VALUE_INVALID))?;
        out.push((a.type_, value.to_vec()));
    }
    Ok(out)
}

/// A mechanism parameter of type `T`, which must have exactly its size.
///
/// # Safety
/// `m.pParameter` is NULL or valid for `m.ulParameterLen` bytes.
unsafe fn parameter<T: Copy>(m: &CK_MECHANISM) -> Result<T> {
    if m.pParameter.is_null() || m.ulParameterLen as usize != std::mem::size_of::<T>() {
        return Err(Rv(CKR_MECHANISM_PARAM_INVALID));
    }
    // SAFETY: non-NULL and of `T`'s size; read unaligned, since the
    // caller need not align it.
    Ok(unsafe { (m.pParameter as *const T).read_unaligned() })
}

/// A mechanism and its parameters.
///
/// # Safety
/// `mechanism` is NULL or valid, with its parameter valid for its length
/// (and any pointers in the parameter valid for theirs).
unsafe fn mechanism(mechanism: *const CK_MECHANISM) -> Result<Mechanism> {
    if mechanism.is_null() {
        return Err(bad());
    }
    // SAFETY: non-NULL, valid by the caller's promise.
    let m = unsafe { &*mechanism };
    let none = |parsed: Mechanism| {
        if m.ulParameterLen == 0 {
            Ok(parsed)
        } else {
            Err(Rv(CKR_MECHANISM_PARAM_INVALID))
        }
    };
    let pss = |p: CK_RSA_PKCS_PSS_PARAMS, expected: Option<CK_MECHANISM_TYPE>| -> Result<_> {
        if expected.is_some_and(|e| e != p.hashAlg) {
            return Err(Rv(CKR_MECHANISM_PARAM_INVALID));
        }
        let hash = digest_of_mechanism(p.hashAlg).ok_or(Rv(CKR_MECHANISM_PARAM_INVALID))?;
        let mgf = digest_of_mgf(p.mgf).ok_or(Rv(CKR_MECHANISM_PARAM_INVALID))?;
        let salt = u32::try_from(p.sLen).map_err(|_| Rv(CKR_MECHANISM_PARAM_INVALID))?;
        Ok((hash, mgf, salt))
    };
    // SAFETY: for every `parameter` and `input` below, the parameter is
    // valid for its length, and its pointers for theirs.
    unsafe {
        Ok(match m.mechanism {
            CKM_AES_KEY_GEN => none(Mechanism::AesKeyGen)?,
            CKM_GENERIC_SECRET_KEY_GEN => none(Mechanism::GenericSecretKeyGen)?,
            CKM_RSA_PKCS_KEY_PAIR_GEN => none(Mechanism::RsaKeyPairGen)?,
            CKM_EC_KEY_PAIR_GEN => none(Mechanism::EcKeyPairGen)?,
            CKM_EC_EDWARDS_KEY_PAIR_GEN => none(Mechanism::EdwardsKeyPairGen)?,
            CKM_AES_GCM => {
                // PKCS#11 2.40's header lacked ulIvBits; both layouts are
                // in use.
                let (iv, iv_len, aad, aad_len, tag_bits) =
                    if m.ulParameterLen as usize == std::mem::size_of::<CK_GCM_PARAMS>() {
                        let p: CK_GCM_PARAMS = parameter(m)?;
                        (p.pIv, p.ulIvLen, p.pAAD, p.ulAADLen, p.ulTagBits)
                    } else {
                        #[derive(Clone, Copy)]
                        #[repr(C)]
                        struct GcmParams240 {
                            iv: *mut CK_BYTE,
                            iv_len: CK_ULONG,
                            aad: *mut CK_BYTE,
                            aad_len: CK_ULONG,
                            tag_bits: CK_ULONG,
                        }
                        let p: GcmParams240 = parameter(m)?;
                        (p.iv, p.iv_len, p.aad, p.aad_len, p.tag_bits)
                    };
                if !(8..=128).contains(&iv_len)
                    || !matches!(tag_bits, 32 | 64 | 96 | 104 | 112 | 120 | 128)
                {
                    return Err(Rv(CKR_MECHANISM_PARAM_INVALID));
                }
                Mechanism::AesGcm {
                    iv: input(iv, iv_len).map_err(|_| Rv(CKR_MECHANISM_PARAM_INVALID))?.to_vec(),
                    aad: input(aad, aad_len).map_err(|_| Rv(CKR_MECHANISM_PARAM_INVALID))?.to_vec(),
                    tag_bits: tag_bits as u32,
                }
            }
            CKM_AES_CBC_PAD => Mechanism::AesCbcPad { iv: parameter::<[u8; 16]>(m)? },
            CKM_AES_CTR => {
                let p: CK_AES_CTR_PARAMS = parameter(m)?;
                if p.ulCounterBits == 0 || p.ulCounterBits > 128 {
                    return Err(Rv(CKR_MECHANISM_PARAM_INVALID));
                }
                Mechanism::AesCtr { counter_bits: p.ulCounterBits as u32, block: p.cb }
            }
            CKM_AES_KEY_WRAP => {
                // RFC 3394's default IV, given or not.
                if m.ulParameterLen != 0 && parameter::<[u8; 8]>(m)? != [0xA6; 8] {
                    return Err(Rv(CKR_MECHANISM_PARAM_INVALID));
                }
                Mechanism::AesKeyWrap
            }
            CKM_AES_KEY_WRAP_KWP => {
                if m.ulParameterLen != 0 && parameter::<[u8; 4]>(m)? != [0xA6, 0x59, 0x59, 0xA6] {
                    return Err(Rv(CKR_MECHANISM_PARAM_INVALID));
                }
                Mechanism::AesKeyWrapPad
            }
            CKM_SHA256_HMAC => none(Mechanism::Hmac(rampart_crypto::DigestAlg::Sha256))?,
            CKM_SHA384_HMAC => none(Mechanism::Hmac(rampart_crypto::DigestAlg::Sha384))?,
            CKM_SHA512_HMAC => none(Mechanism::Hmac(rampart_crypto::DigestAlg::Sha512))?,
            CKM_RSA_PKCS => none(Mechanism::RsaPkcs)?,
            CKM_RSA_PKCS_PSS => {
                let (hash, mgf, salt) = pss(parameter(m)?, None)?;
                Mechanism::RsaPss { hash, mgf, salt }
            }
            CKM_SHA256_RSA_PKCS_PSS | CKM_SHA384_RSA_PKCS_PSS | CKM_SHA512_RSA_PKCS_PSS => {
                let hash_mechanism = match m.mechanism {
                    CKM_SHA256_RSA_PKCS_PSS => CKM_SHA256,
                    CKM_SHA384_RSA_PKCS_PSS => CKM_SHA384,
                    _ => CKM_SHA512,
                };
                let (hash, mgf, salt) = pss(parameter(m)?, Some(hash_mechanism))?;
                Mechanism::HashRsaPss { hash, mgf, salt }
            }
            CKM_RSA_PKCS_OAEP => {
                let p: CK_RSA_PKCS_OAEP_PARAMS = parameter(m)?;
                let hash = digest_of_mechanism(p.hashAlg).ok_or(Rv(CKR_MECHANISM_PARAM_INVALID))?;
                let mgf = digest_of_mgf(p.mgf).ok_or(Rv(CKR_MECHANISM_PARAM_INVALID))?;
                let label = match p.source {
                    0 => Vec::new(),
                    CKZ_DATA_SPECIFIED => input(p.pSourceData as *const CK_BYTE, p.ulSourceDataLen)
                        .map_err(|_| Rv(CKR_MECHANISM_PARAM_INVALID))?
                        .to_vec(),
                    _ => return Err(Rv(CKR_MECHANISM_PARAM_INVALID)),
                };
                Mechanism::RsaOaep { hash, mgf, label }
            }
            CKM_SHA256_RSA_PKCS => none(Mechanism::HashRsaPkcs(rampart_crypto::DigestAlg::Sha256))?,
            CKM_SHA384_RSA_PKCS => none(Mechanism::HashRsaPkcs(rampart_crypto::DigestAlg::Sha384))?,
            CKM_SHA512_RSA_PKCS => none(Mechanism::HashRsaPkcs(rampart_crypto::DigestAlg::Sha512))?,
            CKM_ECDSA => none(Mechanism::Ecdsa)?,
            CKM_ECDSA_SHA256 => none(Mechanism::HashEcdsa(rampart_crypto::DigestAlg::Sha256))?,
            CKM_ECDSA_SHA384 => none(Mechanism::HashEcdsa(rampart_crypto::DigestAlg::Sha384))?,
            CKM_ECDSA_SHA512 => none(Mechanism::HashEcdsa(rampart_crypto::DigestAlg::Sha512))?,
            CKM_EDDSA => {
                // Pure Ed25519 only: no pre-hash, no context.
                if m.ulParameterLen != 0 {
                    let p: CK_EDDSA_PARAMS = parameter(m)?;
                    if p.phFlag != CK_FALSE || p.ulContextDataLen != 0 {
                        return Err(Rv(CKR_MECHANISM_PARAM_INVALID));
                    }
                }
                Mechanism::EdDsa
            }
            other => match digest_of_mechanism(other) {
                Some(alg) => none(Mechanism::Digest(alg))?,
                None => return Err(Rv(CKR_MECHANISM_INVALID)),
            },
        })
    }
}

/// Blocks every signal on the calling thread (the module's own), so that
/// the application's signals (nginx's SIGCHLD, SIGHUP...) are delivered to
/// the application's threads, where its handlers expect them.
fn block_signals() {
    // SAFETY: `set` is a valid sigset_t, filled by sigfillset before
    // pthread_sigmask reads it; the old mask is not asked for.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// `text` blank-padded into a fixed PKCS#11 string field.
fn padded<const N: usize>(text: &str) -> [CK_UTF8CHAR; N] {
    let mut out = [b' '; N];
    let n = text.len().min(N);
    out[..n].copy_from_slice(&text.as_bytes()[..n]);
    out
}

fn version() -> CK_VERSION {
    let major = env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap_or(0);
    let minor = env!("CARGO_PKG_VERSION_MINOR").parse().unwrap_or(0);
    CK_VERSION { major, minor }
}

// ---- general-purpose functions ---------------------------------------

#[no_mangle]
pub unsafe extern "C" fn C_Initialize(args: *mut c_void) -> CK_RV {
    guard(|| {
        if !args.is_null() {
            // SAFETY: a non-NULL argument is a CK_C_INITIALIZE_ARGS.
            let args = unsafe { (args as *const CK_C_INITIALIZE_ARGS).read_unaligned() };
            if !args.pReserved.is_null() {
                return Err(bad());
            }

            let callbacks = [
                args.CreateMutex.is_some(),
                args.DestroyMutex.is_some(),
                args.LockMutex.is_some(),
                args.UnlockMutex.is_some(),
            ];
            if callbacks.iter().any(|c| *c) && !callbacks.iter().all(|c| *c) {
                return Err(bad());
            }
            // Only the operating system's locks are used.
            if callbacks[0] && args.flags & CKF_OS_LOCKING_OK == 0 {
                return Err(Rv(CKR_CANT_LOCK));
            }
        }
        // SAFETY: a non-NULL argument is a CK_C_INITIALIZE_ARGS.
        let own_threads = args.is_null()
            || unsafe { (args as *const CK_C_INITIALIZE_ARGS).read_unaligned() }.flags
                & CKF_LIBRARY_CANT_CREATE_OS_THREADS
                == 0;
        token::initialize(own_threads, block_signals)
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_Finalize(reserved: *mut c_void) -> CK_RV {
    guard(|| if reserved.is_null() { token::finalize() } else { Err(bad()) })
}

#[no_mangle]
pub unsafe extern "C" fn C_GetInfo(info: *mut CK_INFO) -> CK_RV {
    guard(|| {
        token::module()?;
        let value = CK_INFO {
            cryptokiVersion: CK_VERSION { major: 3, minor: 0 },
            manufacturerID: padded("Rampart"),
            flags: 0,
            libraryDescription: padded("Rampart key manager"),
            libraryVersion: version(),
        };
        // SAFETY: `info` is NULL or writable.
        unsafe { put(info, value) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_GetFunctionList(list: *mut *mut CK_FUNCTION_LIST) -> CK_RV {
    guard(|| {
        // SAFETY: `list` is NULL or writable; the list is static and never
        // written through (PKCS#11 callers only read it).
        unsafe { put(list, std::ptr::addr_of!(FUNCTIONS.0) as *mut CK_FUNCTION_LIST) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_GetInterfaceList(
    list: *mut CK_INTERFACE,
    count: *mut CK_ULONG,
) -> CK_RV {
    guard(|| {
        let interfaces = interfaces();
        if count.is_null() {
            return Err(bad());
        }
        if list.is_null() {
            // SAFETY: `count` is non-NULL and writable.
            return unsafe { put(count, interfaces.len() as CK_ULONG) };
        }
        // SAFETY: `count` is non-NULL and readable.
        let room = unsafe { count.read() } as usize;
        // SAFETY: as above.
        unsafe { put(count, interfaces.len() as CK_ULONG)? };
        if room < interfaces.len() {
            return Err(Rv(CKR_BUFFER_TOO_SMALL));
        }
        for (i, interface) in interfaces.into_iter().enumerate() {
            // SAFETY: `list` holds `room` interfaces, at least this many.
            unsafe { list.add(i).write(interface) };
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_GetInterface(
    name: *mut CK_UTF8CHAR,
    wanted: *mut CK_VERSION,
    interface: *mut *mut CK_INTERFACE,
    flags: CK_FLAGS,
) -> CK_RV {
    guard(|| {
        if interface.is_null() {
            return Err(bad());
        }
        if !name.is_null() {
            // SAFETY: a non-NULL name is a NUL-terminated string.
            let name = unsafe { std::ffi::CStr::from_ptr(name as *const std::ffi::c_char) };
            if name.to_bytes() != b"PKCS 11" {
                return Err(bad());
            }
        }
        // SAFETY: a non-NULL version is readable.
        let wanted = (!wanted.is_null()).then(|| unsafe { wanted.read() });
        let chosen = match wanted.map(|v| (v.major, v.minor)) {
            None | Some((3, 0)) => &INTERFACE_3_0,
            Some((2, 40)) => &INTERFACE_2_40,
            Some(_) => return Err(bad()),
        };
        if flags & !chosen.0.flags != 0 {
            return Err(bad());
        }
        // SAFETY: `interface` is non-NULL and writable; the interface is
        // static and only read.
        unsafe { put(interface, std::ptr::addr_of!(chosen.0) as *mut CK_INTERFACE) }
    })
}

// ---- slots and tokens ------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn C_GetSlotList(
    _token_present: CK_BBOOL,
    list: *mut CK_SLOT_ID,
    count: *mut CK_ULONG,
) -> CK_RV {
    guard(|| {
        let m = token::module()?;
        let n = m.slots.len();
        // SAFETY: `count` is NULL or readable and writable; `list` holds
        // as many IDs as `count` said.
        unsafe {
            let room = room(list as *const u8, count)?;
            put(count, n as CK_ULONG)?;
            match room {
                None => Ok(()),
                Some(room) if room < n => Err(Rv(CKR_BUFFER_TOO_SMALL)),
                Some(_) => {
                    for i in 0..n {
                        list.add(i).write(i as CK_SLOT_ID);
                    }
                    Ok(())
                }
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_GetSlotInfo(slot: CK_SLOT_ID, info: *mut CK_SLOT_INFO) -> CK_RV {
    guard(|| {
        let m = token::module()?;
        let s = m.slot(slot)?;
        let description = format!("Rampart key manager for {}", s.client);
        let value = CK_SLOT_INFO {
            slotDescription: padded(&description),
            manufacturerID: padded("Rampart"),
            flags: CKF_TOKEN_PRESENT,
            hardwareVersion: version(),
            firmwareVersion: version(),
        };
        // SAFETY: `info` is NULL or writable.
        unsafe { put(info, value) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_GetTokenInfo(slot: CK_SLOT_ID, info: *mut CK_TOKEN_INFO) -> CK_RV {
    guard(|| {
        let m = token::module()?;
        let s = m.slot(slot)?;
        let (sessions, rw) = m.session_counts(slot);
        let mut flags = CKF_TOKEN_INITIALIZED | CKF_RNG;
        if s.needs_login() {
            flags |= CKF_LOGIN_REQUIRED | CKF_USER_PIN_INITIALIZED;
        }
        // The serial number: the first 16 hex digits of a digest of the
        // client's name, stable for one identity.
        let digest = rampart_crypto::digest(rampart_crypto::HashAlg::Sha256, s.client.as_bytes());
        let serial: String = digest.expose()[..8].iter().map(|b| format!("{b:02x}")).collect();
        let value = CK_TOKEN_INFO {
            label: s.label,
            manufacturerID: padded("Rampart"),
            model: padded("key manager"),
            serialNumber: padded(&serial),
            flags,
            ulMaxSessionCount: CK_EFFECTIVELY_INFINITE,
            ulSessionCount: sessions as CK_ULONG,
            ulMaxRwSessionCount: CK_EFFECTIVELY_INFINITE,
            ulRwSessionCount: rw as CK_ULONG,
            ulMaxPinLen: 256,
            ulMinPinLen: 0,
            ulTotalPublicMemory: CK_UNAVAILABLE_INFORMATION,
            ulFreePublicMemory: CK_UNAVAILABLE_INFORMATION,
            ulTotalPrivateMemory: CK_UNAVAILABLE_INFORMATION,
            ulFreePrivateMemory: CK_UNAVAILABLE_INFORMATION,
            hardwareVersion: version(),
            firmwareVersion: version(),
            utcTime: [b' '; 16],
        };
        // SAFETY: `info` is NULL or writable.
        unsafe { put(info, value) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_GetMechanismList(
    slot: CK_SLOT_ID,
    list: *mut CK_MECHANISM_TYPE,
    count: *mut CK_ULONG,
) -> CK_RV {
    guard(|| {
        let mechanisms = calls::mechanism_list(slot)?;
        // SAFETY: as C_GetSlotList.
        unsafe {
            let room = room(list as *const u8, count)?;
            put(count, mechanisms.len() as CK_ULONG)?;
            match room {
                None => Ok(()),
                Some(room) if room < mechanisms.len() => Err(Rv(CKR_BUFFER_TOO_SMALL)),
                Some(_) => {
                    std::ptr::copy_nonoverlapping(mechanisms.as_ptr(), list, mechanisms.len());
                    Ok(())
                }
            }
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_GetMechanismInfo(
    slot: CK_SLOT_ID,
    kind: CK_MECHANISM_TYPE,
    info: *mut CK_MECHANISM_INFO,
) -> CK_RV {
    // SAFETY: `info` is NULL or writable.
    guard(|| unsafe { put(info, calls::mechanism_info(slot, kind)?) })
}

#[no_mangle]
pub unsafe extern "C" fn C_WaitForSlotEvent(
    flags: CK_FLAGS,
    _slot: *mut CK_SLOT_ID,
    _r: *mut c_void,
) -> CK_RV {
    guard(|| {
        token::module()?;
        // Tokens never come or go while the module is loaded.
        Err(Rv(if flags & CKF_DONT_BLOCK != 0 { CKR_NO_EVENT } else { CKR_FUNCTION_NOT_SUPPORTED }))
    })
}

// ---- sessions --------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn C_OpenSession(
    slot: CK_SLOT_ID,
    flags: CK_FLAGS,
    _application: *mut c_void,
    _notify: CK_NOTIFY,
    session: *mut CK_SESSION_HANDLE,
) -> CK_RV {
    guard(|| {
        if session.is_null() {
            return Err(bad());
        }
        let handle = token::module()?.open_session(slot, flags)?;
        // SAFETY: non-NULL and writable.
        unsafe { put(session, handle) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_CloseSession(session: CK_SESSION_HANDLE) -> CK_RV {
    guard(|| calls::close_session(session))
}

#[no_mangle]
pub unsafe extern "C" fn C_CloseAllSessions(slot: CK_SLOT_ID) -> CK_RV {
    guard(|| calls::close_all_sessions(slot))
}

#[no_mangle]
pub unsafe extern "C" fn C_GetSessionInfo(
    session: CK_SESSION_HANDLE,
    info: *mut CK_SESSION_INFO,
) -> CK_RV {
    // SAFETY: `info` is NULL or writable.
    guard(|| unsafe { put(info, calls::session_info(session)?) })
}

#[no_mangle]
pub unsafe extern "C" fn C_Login(
    session: CK_SESSION_HANDLE,
    user: CK_USER_TYPE,
    pin: *mut CK_UTF8CHAR,
    pin_len: CK_ULONG,
) -> CK_RV {
    guard(|| {
        // SAFETY: `pin` is NULL or valid for `pin_len` bytes.
        let pin = unsafe { input(pin, pin_len) }?;
        calls::login(session, user, pin)
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_Logout(session: CK_SESSION_HANDLE) -> CK_RV {
    guard(|| calls::logout(session))
}

// ---- objects ---------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn C_FindObjectsInit(
    session: CK_SESSION_HANDLE,
    t: *mut CK_ATTRIBUTE,
    n: CK_ULONG,
) -> CK_RV {
    // SAFETY: `t` is NULL or valid for `n` attributes.
    guard(|| calls::find_init(session, unsafe { template(t, n) }?))
}

#[no_mangle]
pub unsafe extern "C" fn C_FindObjects(
    session: CK_SESSION_HANDLE,
    objects: *mut CK_OBJECT_HANDLE,
    max: CK_ULONG,
    count: *mut CK_ULONG,
) -> CK_RV {
    guard(|| {
        if objects.is_null() || count.is_null() {
            return Err(bad());
        }
        let found = calls::find(session, usize::try_from(max).unwrap_or(usize::MAX))?;
        // SAFETY: `objects` holds `max` handles, and `found` has at most
        // `max`; `count` is writable.
        unsafe {
            std::ptr::copy_nonoverlapping(found.as_ptr(), objects, found.len());
            put(count, found.len() as CK_ULONG)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_FindObjectsFinal(session: CK_SESSION_HANDLE) -> CK_RV {
    guard(|| calls::find_final(session))
}

#[no_mangle]
pub unsafe extern "C" fn C_GetAttributeValue(
    session: CK_SESSION_HANDLE,
    object: CK_OBJECT_HANDLE,
    t: *mut CK_ATTRIBUTE,
    n: CK_ULONG,
) -> CK_RV {
    guard(|| {
        if t.is_null() || n > MAX_TEMPLATE {
            return Err(bad());
        }
        // SAFETY: `t` is valid for `n` (bounded) attributes.
        let attributes = unsafe { std::slice::from_raw_parts_mut(t, n as usize) };
        let kinds: Vec<CK_ATTRIBUTE_TYPE> = attributes.iter().map(|a| a.type_).collect();
        let values = calls::attributes(session, object, &kinds)?;
        // PKCS#11 3.0 §5.7: every attribute is answered; the call returns
        // one of the failures met.
        let mut result = Ok(());
        for (a, value) in attributes.iter_mut().zip(values) {
            match value {
                AttributeValue::Value(v) if a.pValue.is_null() => {
                    a.ulValueLen = v.len() as CK_ULONG
                }
                AttributeValue::Value(v) if a.ulValueLen as usize >= v.len() => {
                    // SAFETY: the caller's buffer holds `ulValueLen` bytes.
                    unsafe {
                        std::ptr::copy_nonoverlapping(v.as_ptr(), a.pValue as *mut u8, v.len())
                    };
                    a.ulValueLen = v.len() as CK_ULONG;
                }
                AttributeValue::Value(_) => {
                    a.ulValueLen = CK_UNAVAILABLE_INFORMATION;
                    result = Err(Rv(CKR_BUFFER_TOO_SMALL));
                }
                AttributeValue::Sensitive => {
                    a.ulValueLen = CK_UNAVAILABLE_INFORMATION;
                    result = Err(Rv(CKR_ATTRIBUTE_SENSITIVE));
                }
                AttributeValue::Invalid => {
                    a.ulValueLen = CK_UNAVAILABLE_INFORMATION;
                    result = Err(Rv(CKR_ATTRIBUTE_TYPE_INVALID));
                }
            }
        }
        result
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_GetObjectSize(
    session: CK_SESSION_HANDLE,
    object: CK_OBJECT_HANDLE,
    size: *mut CK_ULONG,
) -> CK_RV {
    guard(|| {
        calls::attributes(session, object, &[])?;
        // SAFETY: `size` is NULL or writable.
        unsafe { put(size, CK_UNAVAILABLE_INFORMATION) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_DestroyObject(
    session: CK_SESSION_HANDLE,
    object: CK_OBJECT_HANDLE,
) -> CK_RV {
    guard(|| calls::destroy_object(session, object))
}

#[no_mangle]
pub unsafe extern "C" fn C_SetAttributeValue(
    session: CK_SESSION_HANDLE,
    object: CK_OBJECT_HANDLE,
    _t: *mut CK_ATTRIBUTE,
    _n: CK_ULONG,
) -> CK_RV {
    guard(|| {
        calls::attributes(session, object, &[])?;
        // Objects are CKA_MODIFIABLE false: the key manager owns them.
        Err(Rv(CKR_ACTION_PROHIBITED))
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_CopyObject(
    session: CK_SESSION_HANDLE,
    object: CK_OBJECT_HANDLE,
    _t: *mut CK_ATTRIBUTE,
    _n: CK_ULONG,
    _new: *mut CK_OBJECT_HANDLE,
) -> CK_RV {
    guard(|| {
        calls::attributes(session, object, &[])?;
        Err(Rv(CKR_ACTION_PROHIBITED))
    })
}

// ---- keys ------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn C_GenerateKey(
    session: CK_SESSION_HANDLE,
    m: *mut CK_MECHANISM,
    t: *mut CK_ATTRIBUTE,
    n: CK_ULONG,
    key: *mut CK_OBJECT_HANDLE,
) -> CK_RV {
    guard(|| {
        if key.is_null() {
            return Err(bad());
        }
        // SAFETY: the mechanism and template are valid as PKCS#11 says.
        let (mechanism, template) = unsafe { (mechanism(m)?, template(t, n)?) };
        let handle = calls::generate_key(session, mechanism, template)?;
        // SAFETY: non-NULL and writable.
        unsafe { put(key, handle) }
    })
}

#[allow(clippy::too_many_arguments)]
#[no_mangle]
pub unsafe extern "C" fn C_GenerateKeyPair(
    session: CK_SESSION_HANDLE,
    m: *mut CK_MECHANISM,
    public_t: *mut CK_ATTRIBUTE,
    public_n: CK_ULONG,
    private_t: *mut CK_ATTRIBUTE,
    private_n: CK_ULONG,
    public: *mut CK_OBJECT_HANDLE,
    private: *mut CK_OBJECT_HANDLE,
) -> CK_RV {
    guard(|| {
        if public.is_null() || private.is_null() {
            return Err(bad());
        }
        // SAFETY: the mechanism and templates are valid as PKCS#11 says.
        let (mechanism, public_template, private_template) = unsafe {
            (mechanism(m)?, template(public_t, public_n)?, template(private_t, private_n)?)
        };
        let (pub_handle, priv_handle) =
            calls::generate_key_pair(session, mechanism, public_template, private_template)?;
        // SAFETY: both non-NULL and writable.
        unsafe {
            put(public, pub_handle)?;
            put(private, priv_handle)
        }
    })
}

// ---- encryption and decryption ---------------------------------------

#[no_mangle]
pub unsafe extern "C" fn C_EncryptInit(
    session: CK_SESSION_HANDLE,
    m: *mut CK_MECHANISM,
    key: CK_OBJECT_HANDLE,
) -> CK_RV {
    // SAFETY: the mechanism is valid as PKCS#11 says.
    guard(|| calls::crypt_init(session, unsafe { mechanism(m) }?, key, true))
}

#[no_mangle]
pub unsafe extern "C" fn C_DecryptInit(
    session: CK_SESSION_HANDLE,
    m: *mut CK_MECHANISM,
    key: CK_OBJECT_HANDLE,
) -> CK_RV {
    // SAFETY: the mechanism is valid as PKCS#11 says.
    guard(|| calls::crypt_init(session, unsafe { mechanism(m) }?, key, false))
}

/// The body of every encrypting and decrypting call.
///
/// # Safety
/// The pointers are valid as PKCS#11 says for the call.
unsafe fn crypt_call(
    session: CK_SESSION_HANDLE,
    encrypt: bool,
    step: Step,
    data: *const CK_BYTE,
    data_len: CK_ULONG,
    out: *mut CK_BYTE,
    out_len: *mut CK_ULONG,
) -> CK_RV {
    guard(|| {
        // SAFETY: valid by the caller's promise.
        unsafe {
            let data = input(data, data_len)?;
            let room = room(out, out_len)?;
            deliver(calls::crypt(session, encrypt, step, data, room)?, out, out_len)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_Encrypt(
    s: CK_SESSION_HANDLE,
    d: *mut CK_BYTE,
    n: CK_ULONG,
    o: *mut CK_BYTE,
    on: *mut CK_ULONG,
) -> CK_RV {
    // SAFETY: forwarded with the caller's promise.
    unsafe { crypt_call(s, true, Step::Single, d, n, o, on) }
}

#[no_mangle]
pub unsafe extern "C" fn C_EncryptUpdate(
    s: CK_SESSION_HANDLE,
    d: *mut CK_BYTE,
    n: CK_ULONG,
    o: *mut CK_BYTE,
    on: *mut CK_ULONG,
) -> CK_RV {
    // SAFETY: forwarded with the caller's promise.
    unsafe { crypt_call(s, true, Step::Update, d, n, o, on) }
}

#[no_mangle]
pub unsafe extern "C" fn C_EncryptFinal(
    s: CK_SESSION_HANDLE,
    o: *mut CK_BYTE,
    on: *mut CK_ULONG,
) -> CK_RV {
    // SAFETY: forwarded with the caller's promise.
    unsafe { crypt_call(s, true, Step::Final, std::ptr::null(), 0, o, on) }
}

#[no_mangle]
pub unsafe extern "C" fn C_Decrypt(
    s: CK_SESSION_HANDLE,
    d: *mut CK_BYTE,
    n: CK_ULONG,
    o: *mut CK_BYTE,
    on: *mut CK_ULONG,
) -> CK_RV {
    // SAFETY: forwarded with the caller's promise.
    unsafe { crypt_call(s, false, Step::Single, d, n, o, on) }
}

#[no_mangle]
pub unsafe extern "C" fn C_DecryptUpdate(
    s: CK_SESSION_HANDLE,
    d: *mut CK_BYTE,
    n: CK_ULONG,
    o: *mut CK_BYTE,
    on: *mut CK_ULONG,
) -> CK_RV {
    // SAFETY: forwarded with the caller's promise.
    unsafe { crypt_call(s, false, Step::Update, d, n, o, on) }
}

#[no_mangle]
pub unsafe extern "C" fn C_DecryptFinal(
    s: CK_SESSION_HANDLE,
    o: *mut CK_BYTE,
    on: *mut CK_ULONG,
) -> CK_RV {
    // SAFETY: forwarded with the caller's promise.
    unsafe { crypt_call(s, false, Step::Final, std::ptr::null(), 0, o, on) }
}

// ---- signatures and MACs ---------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn C_SignInit(
    session: CK_SESSION_HANDLE,
    m: *mut CK_MECHANISM,
    key: CK_OBJECT_HANDLE,
) -> CK_RV {
    // SAFETY: the mechanism is valid as PKCS#11 says.
    guard(|| calls::sign_init(session, unsafe { mechanism(m) }?, key, true))
}

#[no_mangle]
pub unsafe extern "C" fn C_Sign(
    s: CK_SESSION_HANDLE,
    d: *mut CK_BYTE,
    n: CK_ULONG,
    o: *mut CK_BYTE,
    on: *mut CK_ULONG,
) -> CK_RV {
    guard(|| {
        // SAFETY: valid by the caller's promise.
        unsafe {
            let data = input(d, n)?;
            let room = room(o, on)?;
            deliver(calls::sign(s, Step::Single, data, room)?, o, on)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_SignUpdate(s: CK_SESSION_HANDLE, d: *mut CK_BYTE, n: CK_ULONG) -> CK_RV {
    // SAFETY: valid by the caller's promise.
    guard(|| calls::sign_update(s, true, unsafe { input(d, n) }?))
}

#[no_mangle]
pub unsafe extern "C" fn C_SignFinal(
    s: CK_SESSION_HANDLE,
    o: *mut CK_BYTE,
    on: *mut CK_ULONG,
) -> CK_RV {
    guard(|| {
        // SAFETY: valid by the caller's promise.
        unsafe {
            let room = room(o, on)?;
            deliver(calls::sign(s, Step::Final, &[], room)?, o, on)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_VerifyInit(
    session: CK_SESSION_HANDLE,
    m: *mut CK_MECHANISM,
    key: CK_OBJECT_HANDLE,
) -> CK_RV {
    // SAFETY: the mechanism is valid as PKCS#11 says.
    guard(|| calls::sign_init(session, unsafe { mechanism(m) }?, key, false))
}

#[no_mangle]
pub unsafe extern "C" fn C_Verify(
    s: CK_SESSION_HANDLE,
    d: *mut CK_BYTE,
    n: CK_ULONG,
    sig: *mut CK_BYTE,
    sig_n: CK_ULONG,
) -> CK_RV {
    // SAFETY: valid by the caller's promise.
    guard(|| calls::verify(s, Step::Single, unsafe { input(d, n) }?, unsafe { input(sig, sig_n) }?))
}

#[no_mangle]
pub unsafe extern "C" fn C_VerifyUpdate(
    s: CK_SESSION_HANDLE,
    d: *mut CK_BYTE,
    n: CK_ULONG,
) -> CK_RV {
    // SAFETY: valid by the caller's promise.
    guard(|| calls::sign_update(s, false, unsafe { input(d, n) }?))
}

#[no_mangle]
pub unsafe extern "C" fn C_VerifyFinal(
    s: CK_SESSION_HANDLE,
    sig: *mut CK_BYTE,
    sig_n: CK_ULONG,
) -> CK_RV {
    // SAFETY: valid by the caller's promise.
    guard(|| calls::verify(s, Step::Final, &[], unsafe { input(sig, sig_n) }?))
}

// ---- digests and random data -----------------------------------------

#[no_mangle]
pub unsafe extern "C" fn C_DigestInit(session: CK_SESSION_HANDLE, m: *mut CK_MECHANISM) -> CK_RV {
    // SAFETY: the mechanism is valid as PKCS#11 says.
    guard(|| calls::digest_init(session, unsafe { mechanism(m) }?))
}

#[no_mangle]
pub unsafe extern "C" fn C_Digest(
    s: CK_SESSION_HANDLE,
    d: *mut CK_BYTE,
    n: CK_ULONG,
    o: *mut CK_BYTE,
    on: *mut CK_ULONG,
) -> CK_RV {
    guard(|| {
        // SAFETY: valid by the caller's promise.
        unsafe {
            let data = input(d, n)?;
            let room = room(o, on)?;
            deliver(calls::digest(s, data, room)?, o, on)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_DigestUpdate(
    s: CK_SESSION_HANDLE,
    d: *mut CK_BYTE,
    n: CK_ULONG,
) -> CK_RV {
    // SAFETY: valid by the caller's promise.
    guard(|| calls::digest_update(s, unsafe { input(d, n) }?))
}

#[no_mangle]
pub unsafe extern "C" fn C_DigestFinal(
    s: CK_SESSION_HANDLE,
    o: *mut CK_BYTE,
    on: *mut CK_ULONG,
) -> CK_RV {
    guard(|| {
        // SAFETY: valid by the caller's promise.
        unsafe {
            let room = room(o, on)?;
            deliver(calls::digest(s, &[], room)?, o, on)
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_DigestKey(s: CK_SESSION_HANDLE, _key: CK_OBJECT_HANDLE) -> CK_RV {
    guard(|| {
        calls::session_info(s)?;
        // A key's value never leaves the key manager to be digested here.
        Err(Rv(CKR_KEY_INDIGESTIBLE))
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_GenerateRandom(
    s: CK_SESSION_HANDLE,
    out: *mut CK_BYTE,
    n: CK_ULONG,
) -> CK_RV {
    guard(|| {
        if n == 0 {
            return calls::session_info(s).map(|_| ());
        }
        if out.is_null() {
            return Err(bad());
        }
        // SAFETY: `out` is writable for `n` bytes.
        let out = unsafe { std::slice::from_raw_parts_mut(out, n as usize) };
        calls::generate_random(s, out)
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_SeedRandom(
    s: CK_SESSION_HANDLE,
    _seed: *mut CK_BYTE,
    _n: CK_ULONG,
) -> CK_RV {
    guard(|| {
        calls::session_info(s)?;
        // The operating system's generator seeds itself.
        Err(Rv(CKR_RANDOM_SEED_NOT_SUPPORTED))
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_CreateObject(
    session: CK_SESSION_HANDLE,
    t: *mut CK_ATTRIBUTE,
    n: CK_ULONG,
    object: *mut CK_OBJECT_HANDLE,
) -> CK_RV {
    guard(|| {
        if object.is_null() {
            return Err(bad());
        }
        // SAFETY: the template is valid as PKCS#11 says.
        let handle = calls::create_object(session, unsafe { template(t, n) }?)?;
        // SAFETY: non-NULL and writable.
        unsafe { put(object, handle) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn C_WrapKey(
    session: CK_SESSION_HANDLE,
    m: *mut CK_MECHANISM,
    wrapping: CK_OBJECT_HANDLE,
    key: CK_OBJECT_HANDLE,
    out: *mut CK_BYTE,
    out_len: *mut CK_ULONG,
) -> CK_RV {
    guard(|| {
        // SAFETY: the mechanism and output are valid as PKCS#11 says.
        unsafe {
            let mechanism = mechanism(m)?;
            let room = room(out, out_len)?;
            deliver(calls::wrap_key(session, mechanism, wrapping, key, room)?, out, out_len)
        }
    })
}

#[allow(clippy::too_many_arguments)]
#[no_mangle]
pub unsafe extern "C" fn C_UnwrapKey(
    session: CK_SESSION_HANDLE,
    m: *mut CK_MECHANISM,
    unwrapping: CK_OBJECT_HANDLE,
    wrapped: *mut CK_BYTE,
    wrapped_len: CK_ULONG,
    t: *mut CK_ATTRIBUTE,
    n: CK_ULONG,
    key: *mut CK_OBJECT_HANDLE,
) -> CK_RV {
    guard(|| {
        if key.is_null() {
            return Err(bad());
        }
        // SAFETY: the mechanism, wrapped key and template are valid as
        // PKCS#11 says.
        let (mechanism, wrapped, template) =
            unsafe { (mechanism(m)?, input(wrapped, wrapped_len)?, template(t, n)?) };
        let handle = calls::unwrap_key(session, mechanism, unwrapping, wrapped, template)?;
        // SAFETY: non-NULL and writable.
        unsafe { put(key, handle) }
    })
}

// ---- what the module does not do -------------------------------------

/// Functions whose answer is fixed: each returns its code once the
/// module is initialized.
macro_rules! refused {
    ($($name:ident($($arg:ident: $ty:ty),*) => $code:expr;)*) => {$(
        #[no_mangle]
        #[allow(clippy::too_many_arguments)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> CK_RV {
            $(let _ = $arg;)*
            guard(|| {
                token::module()?;
                Err(Rv($code))
            })
        }
    )*};
}

refused! {
    // The token is set up by the module's configuration.
    C_InitToken(a: CK_SLOT_ID, b: *mut CK_UTF8CHAR, c: CK_ULONG, d: *mut CK_UTF8CHAR) => CKR_FUNCTION_NOT_SUPPORTED;
    C_InitPIN(a: CK_SESSION_HANDLE, b: *mut CK_UTF8CHAR, c: CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_SetPIN(a: CK_SESSION_HANDLE, b: *mut CK_UTF8CHAR, c: CK_ULONG, d: *mut CK_UTF8CHAR, e: CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    // Operations run on the key manager: their state is not the module's to save.
    C_GetOperationState(a: CK_SESSION_HANDLE, b: *mut CK_BYTE, c: *mut CK_ULONG) => CKR_STATE_UNSAVEABLE;
    C_SetOperationState(a: CK_SESSION_HANDLE, b: *mut CK_BYTE, c: CK_ULONG, d: CK_OBJECT_HANDLE, e: CK_OBJECT_HANDLE) => CKR_SAVED_STATE_INVALID;
    C_SignRecoverInit(a: CK_SESSION_HANDLE, b: *mut CK_MECHANISM, c: CK_OBJECT_HANDLE) => CKR_MECHANISM_INVALID;
    C_SignRecover(a: CK_SESSION_HANDLE, b: *mut CK_BYTE, c: CK_ULONG, d: *mut CK_BYTE, e: *mut CK_ULONG) => CKR_OPERATION_NOT_INITIALIZED;
    C_VerifyRecoverInit(a: CK_SESSION_HANDLE, b: *mut CK_MECHANISM, c: CK_OBJECT_HANDLE) => CKR_MECHANISM_INVALID;
    C_VerifyRecover(a: CK_SESSION_HANDLE, b: *mut CK_BYTE, c: CK_ULONG, d: *mut CK_BYTE, e: *mut CK_ULONG) => CKR_OPERATION_NOT_INITIALIZED;
    C_DigestEncryptUpdate(a: CK_SESSION_HANDLE, b: *mut CK_BYTE, c: CK_ULONG, d: *mut CK_BYTE, e: *mut CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_DecryptDigestUpdate(a: CK_SESSION_HANDLE, b: *mut CK_BYTE, c: CK_ULONG, d: *mut CK_BYTE, e: *mut CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_SignEncryptUpdate(a: CK_SESSION_HANDLE, b: *mut CK_BYTE, c: CK_ULONG, d: *mut CK_BYTE, e: *mut CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_DecryptVerifyUpdate(a: CK_SESSION_HANDLE, b: *mut CK_BYTE, c: CK_ULONG, d: *mut CK_BYTE, e: *mut CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_DeriveKey(a: CK_SESSION_HANDLE, b: *mut CK_MECHANISM, c: CK_OBJECT_HANDLE, d: *mut CK_ATTRIBUTE, e: CK_ULONG, f: *mut CK_OBJECT_HANDLE) => CKR_MECHANISM_INVALID;
    // Legacy functions (PKCS#11 2.40 §5.16).
    C_GetFunctionStatus(a: CK_SESSION_HANDLE) => CKR_FUNCTION_NOT_PARALLEL;
    C_CancelFunction(a: CK_SESSION_HANDLE) => CKR_FUNCTION_NOT_PARALLEL;
    // PKCS#11 3.0's user names and message-based functions.
    C_LoginUser(a: CK_SESSION_HANDLE, b: CK_USER_TYPE, c: *mut CK_UTF8CHAR, d: CK_ULONG, e: *mut CK_UTF8CHAR, f: CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_SessionCancel(a: CK_SESSION_HANDLE, b: CK_FLAGS) => CKR_FUNCTION_NOT_SUPPORTED;
    C_MessageEncryptInit(a: CK_SESSION_HANDLE, b: *mut CK_MECHANISM, c: CK_OBJECT_HANDLE) => CKR_FUNCTION_NOT_SUPPORTED;
    C_EncryptMessage(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG, d: *mut CK_BYTE, e: CK_ULONG, f: *mut CK_BYTE, g: CK_ULONG, h: *mut CK_BYTE, i: *mut CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_EncryptMessageBegin(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG, d: *mut CK_BYTE, e: CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_EncryptMessageNext(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG, d: *mut CK_BYTE, e: CK_ULONG, f: *mut CK_BYTE, g: *mut CK_ULONG, h: CK_FLAGS) => CKR_FUNCTION_NOT_SUPPORTED;
    C_MessageEncryptFinal(a: CK_SESSION_HANDLE) => CKR_FUNCTION_NOT_SUPPORTED;
    C_MessageDecryptInit(a: CK_SESSION_HANDLE, b: *mut CK_MECHANISM, c: CK_OBJECT_HANDLE) => CKR_FUNCTION_NOT_SUPPORTED;
    C_DecryptMessage(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG, d: *mut CK_BYTE, e: CK_ULONG, f: *mut CK_BYTE, g: CK_ULONG, h: *mut CK_BYTE, i: *mut CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_DecryptMessageBegin(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG, d: *mut CK_BYTE, e: CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_DecryptMessageNext(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG, d: *mut CK_BYTE, e: CK_ULONG, f: *mut CK_BYTE, g: *mut CK_ULONG, h: CK_FLAGS) => CKR_FUNCTION_NOT_SUPPORTED;
    C_MessageDecryptFinal(a: CK_SESSION_HANDLE) => CKR_FUNCTION_NOT_SUPPORTED;
    C_MessageSignInit(a: CK_SESSION_HANDLE, b: *mut CK_MECHANISM, c: CK_OBJECT_HANDLE) => CKR_FUNCTION_NOT_SUPPORTED;
    C_SignMessage(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG, d: *mut CK_BYTE, e: CK_ULONG, f: *mut CK_BYTE, g: *mut CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_SignMessageBegin(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_SignMessageNext(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG, d: *mut CK_BYTE, e: CK_ULONG, f: *mut CK_BYTE, g: *mut CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_MessageSignFinal(a: CK_SESSION_HANDLE) => CKR_FUNCTION_NOT_SUPPORTED;
    C_MessageVerifyInit(a: CK_SESSION_HANDLE, b: *mut CK_MECHANISM, c: CK_OBJECT_HANDLE) => CKR_FUNCTION_NOT_SUPPORTED;
    C_VerifyMessage(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG, d: *mut CK_BYTE, e: CK_ULONG, f: *mut CK_BYTE, g: CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_VerifyMessageBegin(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_VerifyMessageNext(a: CK_SESSION_HANDLE, b: *mut c_void, c: CK_ULONG, d: *mut CK_BYTE, e: CK_ULONG, f: *mut CK_BYTE, g: CK_ULONG) => CKR_FUNCTION_NOT_SUPPORTED;
    C_MessageVerifyFinal(a: CK_SESSION_HANDLE) => CKR_FUNCTION_NOT_SUPPORTED;
}

// ---- the function lists ----------------------------------------------

/// A static that holds raw pointers (to other statics and functions),
/// shared read-only with C.
struct Shared<T>(T);
// SAFETY: the pointers inside point to immutable statics and functions;
// nothing writes through them.
unsafe impl<T> Sync for Shared<T> {}

/// A function list of type `$list` and `$version`: every PKCS#11 2.40
/// function, then the `$extra` ones of the list's version.
macro_rules! function_list {
    ($list:ident, $major:expr, $minor:expr; $($extra:ident),*) => {
        $list {
            version: CK_VERSION { major: $major, minor: $minor },
            C_Initialize: Some(C_Initialize),
            C_Finalize: Some(C_Finalize),
            C_GetInfo: Some(C_GetInfo),
            C_GetFunctionList: Some(C_GetFunctionList),
            C_GetSlotList: Some(C_GetSlotList),
            C_GetSlotInfo: Some(C_GetSlotInfo),
            C_GetTokenInfo: Some(C_GetTokenInfo),
            C_GetMechanismList: Some(C_GetMechanismList),
            C_GetMechanismInfo: Some(C_GetMechanismInfo),
            C_InitToken: Some(C_InitToken),
            C_InitPIN: Some(C_InitPIN),
            C_SetPIN: Some(C_SetPIN),
            C_OpenSession: Some(C_OpenSession),
            C_CloseSession: Some(C_CloseSession),
            C_CloseAllSessions: Some(C_CloseAllSessions),
            C_GetSessionInfo: Some(C_GetSessionInfo),
            C_GetOperationState: Some(C_GetOperationState),
            C_SetOperationState: Some(C_SetOperationState),
            C_Login: Some(C_Login),
            C_Logout: Some(C_Logout),
            C_CreateObject: Some(C_CreateObject),
            C_CopyObject: Some(C_CopyObject),
            C_DestroyObject: Some(C_DestroyObject),
            C_GetObjectSize: Some(C_GetObjectSize),
            C_GetAttributeValue: Some(C_GetAttributeValue),
            C_SetAttributeValue: Some(C_SetAttributeValue),
            C_FindObjectsInit: Some(C_FindObjectsInit),
            C_FindObjects: Some(C_FindObjects),
            C_FindObjectsFinal: Some(C_FindObjectsFinal),
            C_EncryptInit: Some(C_EncryptInit),
            C_Encrypt: Some(C_Encrypt),
            C_EncryptUpdate: Some(C_EncryptUpdate),
            C_EncryptFinal: Some(C_EncryptFinal),
            C_DecryptInit: Some(C_DecryptInit),
            C_Decrypt: Some(C_Decrypt),
            C_DecryptUpdate: Some(C_DecryptUpdate),
            C_DecryptFinal: Some(C_DecryptFinal),
            C_DigestInit: Some(C_DigestInit),
            C_Digest: Some(C_Digest),
            C_DigestUpdate: Some(C_DigestUpdate),
            C_DigestKey: Some(C_DigestKey),
            C_DigestFinal: Some(C_DigestFinal),
            C_SignInit: Some(C_SignInit),
            C_Sign: Some(C_Sign),
            C_SignUpdate: Some(C_SignUpdate),
            C_SignFinal: Some(C_SignFinal),
            C_SignRecoverInit: Some(C_SignRecoverInit),
            C_SignRecover: Some(C_SignRecover),
            C_VerifyInit: Some(C_VerifyInit),
            C_Verify: Some(C_Verify),
            C_VerifyUpdate: Some(C_VerifyUpdate),
            C_VerifyFinal: Some(C_VerifyFinal),
            C_VerifyRecoverInit: Some(C_VerifyRecoverInit),
            C_VerifyRecover: Some(C_VerifyRecover),
            C_DigestEncryptUpdate: Some(C_DigestEncryptUpdate),
            C_DecryptDigestUpdate: Some(C_DecryptDigestUpdate),
            C_SignEncryptUpdate: Some(C_SignEncryptUpdate),
            C_DecryptVerifyUpdate: Some(C_DecryptVerifyUpdate),
            C_GenerateKey: Some(C_GenerateKey),
            C_GenerateKeyPair: Some(C_GenerateKeyPair),
            C_WrapKey: Some(C_WrapKey),
            C_UnwrapKey: Some(C_UnwrapKey),
            C_DeriveKey: Some(C_DeriveKey),
            C_SeedRandom: Some(C_SeedRandom),
            C_GenerateRandom: Some(C_GenerateRandom),
            C_GetFunctionStatus: Some(C_GetFunctionStatus),
            C_CancelFunction: Some(C_CancelFunction),
            C_WaitForSlotEvent: Some(C_WaitForSlotEvent),
            $($extra: Some($extra),)*
        }
    };
}

static FUNCTIONS: Shared<CK_FUNCTION_LIST> = Shared(function_list!(CK_FUNCTION_LIST, 2, 40;));

static FUNCTIONS_3_0: Shared<CK_FUNCTION_LIST_3_0> = Shared(function_list!(
    CK_FUNCTION_LIST_3_0, 3, 0;
    C_GetInterfaceList, C_GetInterface, C_LoginUser, C_SessionCancel, C_MessageEncryptInit, C_EncryptMessage, C_EncryptMessageBegin, C_EncryptMessageNext, C_MessageEncryptFinal, C_MessageDecryptInit, C_DecryptMessage, C_DecryptMessageBegin, C_DecryptMessageNext, C_MessageDecryptFinal, C_MessageSignInit, C_SignMessage, C_SignMessageBegin, C_SignMessageNext, C_MessageSignFinal, C_MessageVerifyInit, C_VerifyMessage, C_VerifyMessageBegin, C_VerifyMessageNext, C_MessageVerifyFinal
));

/// The interface name both lists are offered under.
static INTERFACE_NAME: &[u8; 8] = b"PKCS 11\0";

static INTERFACE_3_0: Shared<CK_INTERFACE> = Shared(CK_INTERFACE {
    pInterfaceName: INTERFACE_NAME.as_ptr() as *mut CK_CHAR,
    pFunctionList: std::ptr::addr_of!(FUNCTIONS_3_0.0) as *mut c_void,
    flags: 0,
});

static INTERFACE_2_40: Shared<CK_INTERFACE> = Shared(CK_INTERFACE {
    pInterfaceName: INTERFACE_NAME.as_ptr() as *mut CK_CHAR,
    pFunctionList: std::ptr::addr_of!(FUNCTIONS.0) as *mut c_void,
    flags: 0,
});

fn interfaces() -> [CK_INTERFACE; 2] {
    [CK_INTERFACE { ..INTERFACE_3_0.0 }, CK_INTERFACE { ..INTERFACE_2_40.0 }]
}
