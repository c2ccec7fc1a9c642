//! The PKCS#11 module's C ABI, driven as an application would: through
//! `C_GetFunctionList`, with every pointer valid for the length given
//! beside it (PKCS#11's promise to a module) and everything else chosen
//! by the input: which functions, in which order, on which handles, with
//! which templates, mechanisms, parameters and buffer lengths.
//!
//! The module is configured with a real client bundle (made at start by
//! a throwaway CA) and a key manager address where a listener accepts and closes
//! every connection: every call that reaches the key manager fails fast
//! with `CKR_DEVICE_ERROR`, so the input reaches the argument checks,
//! the session and operation state machines, and the local digests and
//! random numbers, not the network.

use std::ffi::c_void;
use std::net::TcpListener;
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::OnceLock;

use cryptoki_sys::*;

// Forces the module's objects into the binary; its functions are reached
// through the function list, as an application reaches them.
use rampart_pkcs11 as _;

extern "C" {
    fn C_GetFunctionList(list: *mut *mut CK_FUNCTION_LIST) -> CK_RV;
}

/// Calls per input, at most.
const MAX_CALLS: usize = 48;
/// Largest buffer the input makes (data, attribute values, outputs).
const MAX_BUFFER: usize = 4096;

/// Writes the module's configuration once and points it there.
fn configure() {
    static DONE: OnceLock<PathBuf> = OnceLock::new();
    DONE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("rampart-fuzz-pkcs11-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        let bundle = dir.join("app.bundle");
        client_bundle().write(&bundle).expect("bundle");
        let listener = TcpListener::bind("127.0.0.1:0").expect("a local listener");
        let address = listener.local_addr().expect("its address");
        std::thread::spawn(move || {
            for connection in listener.incoming() {
                drop(connection);
            }
        });
        let config = dir.join("pkcs11.conf");
        std::fs::write(
            &config,
            format!(
                "[slot]\nlabel = with-pin\nbundle = {b}\nkmip = {address}\npin = 1234\n\n\
                 [slot]\nlabel = without-pin\nbundle = {b}\nkmip = {address}\n",
                b = bundle.display()
            ),
        )
        .expect("configuration");
        std::env::set_var(rampart_pkcs11::CONFIG_ENV, &config);
        config
    });
}

/// A client bundle of a throwaway deployment CA, as `kms client issue`
/// writes one (the module checks the certificates when it starts).
fn client_bundle() -> rampart_kms::Bundle {
    use rampart_kms::pki::{client_request, Authority};
    let (authority, _) = Authority::generate("fuzz").expect("a CA");
    let (request, key) = client_request("app").expect("a request");
    let issued = authority.issue_client_days(&request, "app", 3650).expect("a certificate");
    rampart_kms::Bundle {
        format: rampart_kms::bundle::BUNDLE_FORMAT.into(),
        name: "app".into(),
        endpoints: vec!["https://127.0.0.1:1".into()],
        ca_cert: authority.cert_pem().into(),
        cert: issued.cert_pem,
        key,
    }
}

/// Reads choices from the input; past its end every choice is 0.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let len = usize::from(self.u16()) % (max + 1);
        let take = len.min(self.0.len());
        let (head, rest) = self.0.split_at(take);
        self.0 = rest;
        let mut out = head.to_vec();
        out.resize(len, 0);
        out
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A handle: one the module gave, or a number of the input's.
    fn handle(&mut self, known: &[CK_ULONG]) -> CK_ULONG {
        let b = self.u8();
        match b {
            0..=0xDF if !known.is_empty() => known[usize::from(b) % known.len()],
            0xFF => CK_ULONG::MAX,
            _ => CK_ULONG::from(b & 0x1F),
        }
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[usize::from(self.u8()) % from.len()]
    }
}

const MECHANISMS: &[CK_MECHANISM_TYPE] = &[
    CKM_AES_KEY_GEN,
    CKM_GENERIC_SECRET_KEY_GEN,
    CKM_RSA_PKCS_KEY_PAIR_GEN,
    CKM_EC_KEY_PAIR_GEN,
    CKM_EC_EDWARDS_KEY_PAIR_GEN,
    CKM_AES_GCM,
    CKM_AES_CBC_PAD,
    CKM_AES_CTR,
    CKM_AES_KEY_WRAP,
    CKM_AES_KEY_WRAP_KWP,
    CKM_SHA256_HMAC,
    CKM_SHA512_HMAC,
    CKM_RSA_PKCS,
    CKM_RSA_PKCS_PSS,
    CKM_SHA256_RSA_PKCS_PSS,
    CKM_RSA_PKCS_OAEP,
    CKM_SHA384_RSA_PKCS,
    CKM_ECDSA,
    CKM_ECDSA_SHA256,
    CKM_EDDSA,
    CKM_SHA_1,
    CKM_SHA256,
    CKM_SHA512,
    CKM_DES3_CBC,
    CKM_VENDOR_DEFINED,
];

const ATTRIBUTES: &[CK_ATTRIBUTE_TYPE] = &[
    CKA_CLASS,
    CKA_KEY_TYPE,
    CKA_LABEL,
    CKA_ID,
    CKA_VALUE,
    CKA_VALUE_LEN,
    CKA_TOKEN,
    CKA_PRIVATE,
    CKA_SENSITIVE,
    CKA_EXTRACTABLE,
    CKA_ENCRYPT,
    CKA_DECRYPT,
    CKA_SIGN,
    CKA_VERIFY,
    CKA_WRAP,
    CKA_UNWRAP,
    CKA_MODULUS,
    CKA_MODULUS_BITS,
    CKA_PUBLIC_EXPONENT,
    CKA_EC_PARAMS,
    CKA_EC_POINT,
    CKA_CERTIFICATE_TYPE,
    CKA_SUBJECT,
    CKA_PUBLIC_KEY_INFO,
    CKA_ALWAYS_AUTHENTICATE,
    CKA_VENDOR_DEFINED,
];

/// A template the input describes; `values` owns what the attributes
/// point at, for as long as the template is used.
struct Template {
    attributes: Vec<CK_ATTRIBUTE>,
    _values: Vec<Vec<u8>>,
}

impl Template {
    /// Values are buffers the module may also write into (as
    /// `C_GetAttributeValue` does).
    fn new(input: &mut Input<'_>) -> Self {
        let count = usize::from(input.u8() % 9);
        let mut values = Vec::with_capacity(count);
        let mut attributes = Vec::with_capacity(count);
        for _ in 0..count {
            let kind = match input.u8() {
                0xF0..=0xFF => CK_ULONG::from(input.u16()),
                b => ATTRIBUTES[usize::from(b) % ATTRIBUTES.len()],
            };
            let mut value = match input.u8() % 4 {
                0 => vec![input.u8() & 1],
                1 => CK_ULONG::from(input.u16()).to_ne_bytes().to_vec(),
                _ => input.bytes(256),
            };
            let (pointer, len) = match input.u8() % 8 {
                // NULL with a length: the module must refuse, not read.
                0 => (null_mut(), value.len() as CK_ULONG + 1),
                1 => (null_mut(), 0),
                _ => (value.as_mut_ptr().cast::<c_void>(), value.len() as CK_ULONG),
            };
            attributes.push(CK_ATTRIBUTE { type_: kind, pValue: pointer, ulValueLen: len });
            values.push(value);
        }
        Self { attributes, _values: values }
    }

    fn ptr(&mut self) -> *mut CK_ATTRIBUTE {
        if self.attributes.is_empty() {
            null_mut()
        } else {
            self.attributes.as_mut_ptr()
        }
    }

    fn len(&self) -> CK_ULONG {
        self.attributes.len() as CK_ULONG
    }
}

/// A mechanism the input describes, with its parameter and whatever the
/// parameter points at.
struct Mech {
    mechanism: CK_MECHANISM,
    _parameter: Vec<u8>,
    _pointed: Vec<Vec<u8>>,
}

impl Mech {
    fn new(input: &mut Input<'_>) -> Self {
        let kind = match input.u8() {
            0xF8..=0xFF => CK_ULONG::from(input.u16()),
            b => MECHANISMS[usize::from(b) % MECHANISMS.len()],
        };
        let mut pointed: Vec<Vec<u8>> = Vec::new();
        let mut point = |input: &mut Input<'_>, max: usize| -> (*mut u8, CK_ULONG) {
            let mut buffer = input.bytes(max);
            let len = buffer.len() as CK_ULONG;
            let ptr = if buffer.is_empty() && input.u8() & 1 == 0 {
                null_mut()
            } else {
                buffer.as_mut_ptr()
            };
            pointed.push(buffer);
            (ptr, len)
        };
        let mut parameter: Vec<u8> = match input.u8() % 4 {
            0 => Vec::new(),
            1 => input.bytes(64),
            _ => match kind {
                CKM_AES_GCM => {
                    let (iv, iv_len) = point(input, 160);
                    let (aad, aad_len) = point(input, 256);
                    let tag_bits = CK_ULONG::from(input.u8());
                    if input.u8() & 1 == 0 {
                        as_bytes(&CK_GCM_PARAMS {
                            pIv: iv,
                            ulIvLen: iv_len,
                            ulIvBits: iv_len * 8,
                            pAAD: aad,
                            ulAADLen: aad_len,
                            ulTagBits: tag_bits,
                        })
                    } else {
                        // PKCS#11 2.40's layout, without ulIvBits.
                        [
                            (iv as usize).to_ne_bytes(),
                            iv_len.to_ne_bytes(),
                            (aad as usize).to_ne_bytes(),
                            aad_len.to_ne_bytes(),
                            tag_bits.to_ne_bytes(),
                        ]
                        .concat()
                    }
                }
                CKM_AES_CTR => {
                    let mut cb = [0u8; 16];
                    cb.iter_mut().for_each(|b| *b = input.u8());
                    as_bytes(&CK_AES_CTR_PARAMS { ulCounterBits: CK_ULONG::from(input.u8()), cb })
                }
                CKM_RSA_PKCS_PSS | CKM_SHA256_RSA_PKCS_PSS => as_bytes(&CK_RSA_PKCS_PSS_PARAMS {
                    hashAlg: input.pick(&[CKM_SHA256, CKM_SHA384, CKM_SHA_1, CKM_MD5]),
                    mgf: input.pick(&[CKG_MGF1_SHA256, CKG_MGF1_SHA512, 0]),
                    sLen: CK_ULONG::from(input.u16()),
                }),
                CKM_RSA_PKCS_OAEP => {
                    let (label, label_len) = point(input, 64);
                    as_bytes(&CK_RSA_PKCS_OAEP_PARAMS {
                        hashAlg: input.pick(&[CKM_SHA256, CKM_SHA_1, CKM_MD5]),
                        mgf: input.pick(&[CKG_MGF1_SHA256, CKG_MGF1_SHA1, 0]),
                        source: input.pick(&[0, CKZ_DATA_SPECIFIED, 7]),
                        pSourceData: label.cast(),
                        ulSourceDataLen: label_len,
                    })
                }
                CKM_EDDSA => {
                    let (context, context_len) = point(input, 32);
                    as_bytes(&CK_EDDSA_PARAMS {
                        phFlag: input.u8() & 1,
                        ulContextDataLen: context_len,
                        pContextData: context,
                    })
                }
                _ => input.bytes(32),
            },
        };
        let (pointer, len) = match input.u8() % 8 {
            0 => (null_mut(), parameter.len() as CK_ULONG + 1),
            _ if parameter.is_empty() => (null_mut(), 0),
            _ => (parameter.as_mut_ptr().cast::<c_void>(), parameter.len() as CK_ULONG),
        };
        Self {
            mechanism: CK_MECHANISM { mechanism: kind, pParameter: pointer, ulParameterLen: len },
            _parameter: parameter,
            _pointed: pointed,
        }
    }

    fn ptr(&mut self) -> *mut CK_MECHANISM {
        &mut self.mechanism
    }
}

fn as_bytes<T: Copy>(value: &T) -> Vec<u8> {
    // SAFETY: `T` is a plain C struct of integers and pointers; its bytes
    // are read, never interpreted here.
    unsafe {
        std::slice::from_raw_parts((value as *const T).cast::<u8>(), std::mem::size_of::<T>())
    }
    .to_vec()
}

/// An output buffer and its length word, as the input chooses: a length
/// query (NULL buffer), a buffer of some length, or a NULL length pointer.
struct Output {
    buffer: Vec<u8>,
    len: CK_ULONG,
    null_buffer: bool,
    null_len: bool,
}

impl Output {
    fn new(input: &mut Input<'_>) -> Self {
        let mode = input.u8();
        let size = usize::from(input.u16()) % (MAX_BUFFER + 1);
        Self {
            buffer: vec![0; size],
            len: size as CK_ULONG,
            null_buffer: mode % 4 == 0,
            null_len: mode == 0xFF,
        }
    }

    fn buffer(&mut self) -> *mut u8 {
        if self.null_buffer {
            null_mut()
        } else {
            self.buffer.as_mut_ptr()
        }
    }

    fn len(&mut self) -> *mut CK_ULONG {
        if self.null_len {
            null_mut()
        } else {
            &mut self.len
        }
    }

    /// After a call, the module's length must fit what it may write.
    fn check(&self, rv: CK_RV) {
        if rv == CKR_OK && !self.null_buffer && !self.null_len {
            assert!(self.len as usize <= self.buffer.len(), "the module wrote past the buffer");
        }
    }
}

/// Data the input gives (NULL with a length sometimes).
struct Data {
    bytes: Vec<u8>,
    null: bool,
}

impl Data {
    fn new(input: &mut Input<'_>) -> Self {
        let null = input.u8() == 0xFF;
        Self { bytes: input.bytes(MAX_BUFFER), null }
    }

    fn ptr(&mut self) -> *mut u8 {
        if self.null {
            null_mut()
        } else {
            self.bytes.as_mut_ptr()
        }
    }

    fn len(&self) -> CK_ULONG {
        self.bytes.len() as CK_ULONG + CK_ULONG::from(self.null)
    }
}

extern "C" fn create_mutex(_: *mut *mut c_void) -> CK_RV {
    CKR_GENERAL_ERROR
}
extern "C" fn mutex_op(_: *mut c_void) -> CK_RV {
    CKR_GENERAL_ERROR
}

/// One input: C_Initialize (arguments from the input), up to
/// [`MAX_CALLS`] calls, C_Finalize.
pub fn pkcs11_module(data: &[u8]) {
    configure();
    let mut input = Input(data);
    let mut list: *mut CK_FUNCTION_LIST = null_mut();
    // SAFETY: `list` is writable; the module writes a pointer to its
    // static function list.
    assert_eq!(unsafe { C_GetFunctionList(&mut list) }, CKR_OK);
    // SAFETY: the module's function list is static and fully populated.
    let f = unsafe { &*list };
    let init_mode = input.u8();
    let callbacks = init_mode & 4 != 0;
    let mut args = CK_C_INITIALIZE_ARGS {
        CreateMutex: callbacks.then_some(create_mutex as _),
        DestroyMutex: callbacks.then_some(mutex_op as _),
        LockMutex: callbacks.then_some(mutex_op as _),
        UnlockMutex: (callbacks && init_mode & 8 == 0).then_some(mutex_op as _),
        flags: [0, CKF_OS_LOCKING_OK, CKF_LIBRARY_CANT_CREATE_OS_THREADS]
            [usize::from(init_mode >> 4) % 3],
        pReserved: if init_mode & 2 != 0 && init_mode & 0x40 != 0 {
            std::ptr::addr_of_mut!(list).cast()
        } else {
            null_mut()
        },
    };
    let args_ptr =
        if init_mode & 1 == 0 { null_mut() } else { std::ptr::addr_of_mut!(args).cast::<c_void>() };
    // SAFETY (this call and every call below): each pointer passed is NULL
    // or valid for the length passed beside it, for the whole call.
    let rv = unsafe { f.C_Initialize.unwrap()(args_ptr) };
    if rv != CKR_OK {
        return;
    }
    let mut sessions: Vec<CK_ULONG> = Vec::new();
    let mut objects: Vec<CK_ULONG> = Vec::new();
    for _ in 0..MAX_CALLS {
        if input.is_empty() {
            break;
        }
        // SAFETY: as above.
        unsafe { call(f, &mut input, &mut sessions, &mut objects) };
    }
    // SAFETY: as above.
    assert_eq!(unsafe { f.C_Finalize.unwrap()(null_mut()) }, CKR_OK);
}

/// One call the input picks.
///
/// # Safety
/// `f` is the module's initialized function list.
unsafe fn call(
    f: &CK_FUNCTION_LIST,
    input: &mut Input<'_>,
    sessions: &mut Vec<CK_ULONG>,
    objects: &mut Vec<CK_ULONG>,
) {
    let which = input.u8() % 40;
    let session = input.handle(sessions);
    // SAFETY: every pointer below is NULL or valid for the length beside
    // it, as the caller of a module promises.
    unsafe {
        match which {
            0 => {
                let mut out = Output::new(input);
                let mut count = (out.buffer.len() / 8) as CK_ULONG;
                let slots =
                    if out.null_buffer { null_mut() } else { out.buffer.as_mut_ptr().cast() };
                f.C_GetSlotList.unwrap()(CK_BBOOL::from(input.u8() & 1), slots, &mut count);
            }
            1 => {
                let mut info: CK_SLOT_INFO = std::mem::zeroed();
                f.C_GetSlotInfo.unwrap()(input.handle(&[]), &mut info);
                let mut token: CK_TOKEN_INFO = std::mem::zeroed();
                f.C_GetTokenInfo.unwrap()(input.handle(&[]), &mut token);
            }
            2 => {
                let mut out = Output::new(input);
                let mut count = (out.buffer.len() / 8) as CK_ULONG;
                let list =
                    if out.null_buffer { null_mut() } else { out.buffer.as_mut_ptr().cast() };
                f.C_GetMechanismList.unwrap()(input.handle(&[]), list, &mut count);
            }
            3 => {
                let mut info: CK_MECHANISM_INFO = std::mem::zeroed();
                let kind = input.pick(MECHANISMS);
                f.C_GetMechanismInfo.unwrap()(input.handle(&[]), kind, &mut info);
            }
            4 | 5 => {
                let flags =
                    input.pick(&[CKF_SERIAL_SESSION | CKF_RW_SESSION, CKF_SERIAL_SESSION, 0]);
                let mut handle: CK_SESSION_HANDLE = 0;
                if f.C_OpenSession.unwrap()(input.handle(&[]), flags, null_mut(), None, &mut handle)
                    == CKR_OK
                {
                    sessions.push(handle);
                }
            }
            6 => {
                f.C_CloseSession.unwrap()(session);
            }
            7 => {
                f.C_CloseAllSessions.unwrap()(input.handle(&[]));
            }
            8 => {
                let mut info: CK_SESSION_INFO = std::mem::zeroed();
                f.C_GetSessionInfo.unwrap()(session, &mut info);
            }
            9 => {
                let mut pin = Data::new(input);
                let user = input.pick(&[CKU_USER, CKU_SO, CKU_CONTEXT_SPECIFIC, 9]);
                f.C_Login.unwrap()(session, user, pin.ptr(), pin.len());
            }
            10 => {
                f.C_Logout.unwrap()(session);
            }
            11 => {
                let mut template = Template::new(input);
                f.C_FindObjectsInit.unwrap()(session, template.ptr(), template.len());
            }
            12 => {
                let mut found = vec![0 as CK_OBJECT_HANDLE; usize::from(input.u8() % 16)];
                let mut count: CK_ULONG = 0;
                let max = found.len() as CK_ULONG;
                if f.C_FindObjects.unwrap()(session, found.as_mut_ptr(), max, &mut count) == CKR_OK
                {
                    assert!(count <= max, "more objects than asked for");
                    objects.extend_from_slice(&found[..count as usize]);
                }
            }
            13 => {
                f.C_FindObjectsFinal.unwrap()(session);
            }
            14 => {
                let mut template = Template::new(input);
                f.C_GetAttributeValue.unwrap()(
                    session,
                    input.handle(objects),
                    template.ptr(),
                    template.len(),
                );
            }
            15 => {
                let mut size: CK_ULONG = 0;
                f.C_GetObjectSize.unwrap()(session, input.handle(objects), &mut size);
            }
            16 => {
                f.C_DestroyObject.unwrap()(session, input.handle(objects));
            }
            17 => {
                let mut template = Template::new(input);
                f.C_SetAttributeValue.unwrap()(
                    session,
                    input.handle(objects),
                    template.ptr(),
                    template.len(),
                );
            }
            18 => {
                let mut template = Template::new(input);
                let mut new: CK_OBJECT_HANDLE = 0;
                let object = input.handle(objects);
                f.C_CopyObject.unwrap()(session, object, template.ptr(), template.len(), &mut new);
            }
            19 => {
                let mut template = Template::new(input);
                let mut new: CK_OBJECT_HANDLE = 0;
                if f.C_CreateObject.unwrap()(session, template.ptr(), template.len(), &mut new)
                    == CKR_OK
                {
                    objects.push(new);
                }
            }
            20 => {
                let mut mechanism = Mech::new(input);
                let mut template = Template::new(input);
                let mut key: CK_OBJECT_HANDLE = 0;
                f.C_GenerateKey.unwrap()(
                    session,
                    mechanism.ptr(),
                    template.ptr(),
                    template.len(),
                    &mut key,
                );
            }
            21 => {
                let mut mechanism = Mech::new(input);
                let mut public = Template::new(input);
                let mut private = Template::new(input);
                let (mut a, mut b): (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) = (0, 0);
                f.C_GenerateKeyPair.unwrap()(
                    session,
                    mechanism.ptr(),
                    public.ptr(),
                    public.len(),
                    private.ptr(),
                    private.len(),
                    &mut a,
                    &mut b,
                );
            }
            22 => {
                let mut mechanism = Mech::new(input);
                f.C_EncryptInit.unwrap()(session, mechanism.ptr(), input.handle(objects));
            }
            23 => {
                let mut mechanism = Mech::new(input);
                f.C_DecryptInit.unwrap()(session, mechanism.ptr(), input.handle(objects));
            }
            24 => {
                let mut mechanism = Mech::new(input);
                f.C_SignInit.unwrap()(session, mechanism.ptr(), input.handle(objects));
            }
            25 => {
                let mut mechanism = Mech::new(input);
                f.C_VerifyInit.unwrap()(session, mechanism.ptr(), input.handle(objects));
            }
            26 => {
                let mut mechanism = Mech::new(input);
                f.C_DigestInit.unwrap()(session, mechanism.ptr());
            }
            27 => {
                let mut data = Data::new(input);
                let mut out = Output::new(input);
                let function = input.pick(&[
                    f.C_Encrypt,
                    f.C_Decrypt,
                    f.C_Sign,
                    f.C_Digest,
                    f.C_EncryptUpdate,
                    f.C_DecryptUpdate,
                ]);
                let rv =
                    function.unwrap()(session, data.ptr(), data.len(), out.buffer(), out.len());
                out.check(rv);
            }
            28 => {
                let mut data = Data::new(input);
                let update = input.pick(&[f.C_SignUpdate, f.C_VerifyUpdate, f.C_DigestUpdate]);
                update.unwrap()(session, data.ptr(), data.len());
            }
            29 => {
                let mut out = Output::new(input);
                let last = input.pick(&[
                    f.C_EncryptFinal,
                    f.C_DecryptFinal,
                    f.C_SignFinal,
                    f.C_DigestFinal,
                ]);
                let rv = last.unwrap()(session, out.buffer(), out.len());
                out.check(rv);
            }
            30 => {
                let mut data = Data::new(input);
                let mut signature = Data::new(input);
                f.C_Verify.unwrap()(
                    session,
                    data.ptr(),
                    data.len(),
                    signature.ptr(),
                    signature.len(),
                );
            }
            31 => {
                let mut signature = Data::new(input);
                f.C_VerifyFinal.unwrap()(session, signature.ptr(), signature.len());
            }
            32 => {
                f.C_DigestKey.unwrap()(session, input.handle(objects));
            }
            33 => {
                let mut out = vec![0u8; usize::from(input.u16()) % (MAX_BUFFER + 1)];
                let len = out.len() as CK_ULONG;
                f.C_GenerateRandom.unwrap()(session, out.as_mut_ptr(), len);
            }
            34 => {
                let mut seed = Data::new(input);
                f.C_SeedRandom.unwrap()(session, seed.ptr(), seed.len());
            }
            35 => {
                let mut mechanism = Mech::new(input);
                let mut out = Output::new(input);
                let (wrapping, key) = (input.handle(objects), input.handle(objects));
                let rv = f.C_WrapKey.unwrap()(
                    session,
                    mechanism.ptr(),
                    wrapping,
                    key,
                    out.buffer(),
                    out.len(),
                );
                out.check(rv);
            }
            36 => {
                let mut mechanism = Mech::new(input);
                let mut wrapped = Data::new(input);
                let mut template = Template::new(input);
                let mut key: CK_OBJECT_HANDLE = 0;
                f.C_UnwrapKey.unwrap()(
                    session,
                    mechanism.ptr(),
                    input.handle(objects),
                    wrapped.ptr(),
                    wrapped.len(),
                    template.ptr(),
                    template.len(),
                    &mut key,
                );
            }
            37 => {
                let mut info: CK_INFO = std::mem::zeroed();
                f.C_GetInfo.unwrap()(if input.u8() == 0 { null_mut() } else { &mut info });
            }
            38 => {
                let mut slot: CK_SLOT_ID = 0;
                let flags = CKF_DONT_BLOCK | CK_FLAGS::from(input.u8() & 2);
                f.C_WaitForSlotEvent.unwrap()(flags, &mut slot, null_mut());
            }
            _ => {
                // Initialize again: refused, already initialized.
                let rv = f.C_Initialize.unwrap()(null_mut());
                assert_eq!(rv, CKR_CRYPTOKI_ALREADY_INITIALIZED);
            }
        }
    }
}
