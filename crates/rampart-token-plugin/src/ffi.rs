//! cryptsetup's external token ABI, as libcryptsetup 2.4 to 2.7 load it
//! (`lib/luks2/luks2_token.c`, `libcryptsetup.h`): the library dlopen()s
//! `libcryptsetup-token-TYPE.so` and looks up, with
//! `dlvsym(..., "CRYPTSETUP_TOKEN_1.0")`:
//!
//! * `cryptsetup_token_open` (required) and `cryptsetup_token_version`
//!   (required by the loader),
//! * `cryptsetup_token_open_pin`, `cryptsetup_token_buffer_free`,
//!   `cryptsetup_token_validate`, `cryptsetup_token_dump` (optional).
//!
//! Contract: open returns 0 and a passphrase buffer that the library gives
//! back to `buffer_free` (which must wipe it); a negative errno otherwise
//! (-EPERM refused, -EAGAIN something needed is absent, -ENOENT unusable;
//! the library turns -EINVAL and -EPERM of external tokens into -ENOENT
//! and moves on to the next token). `validate` returns 0 when the JSON is
//! a valid token of the type. Strings from the library are only borrowed
//! for the call.
//!
//! The exported names are not Rust `#[no_mangle]` items: rustc lists those
//! in its own (anonymous) version script, which would leave them
//! unversioned and invisible to `dlvsym`. Each is an assembly entry point
//! that jumps to its Rust function; `cryptsetup-token.map` gives them the
//! version node and keeps every other symbol local.
//!
//! The libcryptsetup functions the plugin calls are looked up at run time
//! (`Api`), not linked: the plugin's only NEEDED libraries are the C
//! runtime's.
//!
//! This is the only `unsafe` of the crate. No function here lets a panic
//! cross into C: each body runs under `catch_unwind`.
#![allow(unsafe_code)]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

use zeroize::Zeroize;

use crate::{Level, Log};

/// libcryptsetup's opaque device handle.
#[repr(C)]
struct CryptDevice {
    _opaque: [u8; 0],
}

// libcryptsetup.h CRYPT_LOG_*.
const CRYPT_LOG_NORMAL: c_int = 0;
const CRYPT_LOG_ERROR: c_int = 1;
const CRYPT_LOG_VERBOSE: c_int = 2;
const CRYPT_LOG_DEBUG: c_int = -1;

type CryptLog = unsafe extern "C" fn(cd: *mut CryptDevice, level: c_int, msg: *const c_char);
type CryptTokenJsonGet =
    unsafe extern "C" fn(cd: *mut CryptDevice, token: c_int, json: *mut *const c_char) -> c_int;
type CryptGetUuid = unsafe extern "C" fn(cd: *mut CryptDevice) -> *const c_char;

/// The libcryptsetup functions the plugin calls, found at run time.
///
/// The plugin does not link libcryptsetup (no `-lcryptsetup`, no NEEDED
/// entry): it is only ever loaded by libcryptsetup, so these functions
/// are already in the process, and the plugin builds on a machine without
/// libcryptsetup's development files. They are not left as undefined
/// symbols of the `.so` either: the dynamic loader resolves those in the
/// global scope only, so a libcryptsetup that was itself dlopen()ed with
/// `RTLD_LOCAL` (as systemd does) would make the plugin fail to load, or
/// crash at its first call with lazy binding. Instead the library is
/// looked up by its soname with `RTLD_NOLOAD` (found whatever its scope,
/// never loaded by us), else in the global scope (`RTLD_DEFAULT`); a
/// missing function makes the entry points fail with an errno, never
/// crash. The library is pinned (`RTLD_NODELETE`), so the pointers, kept
/// for the life of the process, cannot outlive it.
#[derive(Clone, Copy)]
struct Api {
    log: CryptLog,
    token_json_get: CryptTokenJsonGet,
    get_uuid: CryptGetUuid,
}

/// libcryptsetup's soname (its ABI has been 12 since cryptsetup 2.0).
const LIBCRYPTSETUP: &CStr = c"libcryptsetup.so.12";

impl Api {
    /// The functions, resolved on first use; `None` when the process has
    /// no libcryptsetup (or one without them).
    fn get() -> Option<Self> {
        static API: OnceLock<Option<Api>> = OnceLock::new();
        *API.get_or_init(Self::resolve)
    }

    fn resolve() -> Option<Self> {
        let flags = libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_NODELETE;
        // SAFETY: a NUL-terminated name; with RTLD_NOLOAD dlopen() only
        // returns a handle to the library if it is already loaded (it runs
        // no constructor), and RTLD_NODELETE keeps it loaded from then on.
        let handle = unsafe { libc::dlopen(LIBCRYPTSETUP.as_ptr(), flags) };
        let scope = if handle.is_null() { libc::RTLD_DEFAULT } else { handle };
        let log = lookup(scope, c"crypt_log")?;
        let token_json_get = lookup(scope, c"crypt_token_json_get")?;
        let get_uuid = lookup(scope, c"crypt_get_uuid")?;
        if handle.is_null() {
            // Found in the global scope: pin the library that holds them.
            pin_object_of(log);
        }
        // SAFETY: each pointer is libcryptsetup's exported function of that
        // name, whose C prototype (libcryptsetup.h, stable across the
        // library's ABI 12) is exactly the type it is cast to.
        unsafe {
            Some(Self {
                log: std::mem::transmute::<*mut c_void, CryptLog>(log),
                token_json_get: std::mem::transmute::<*mut c_void, CryptTokenJsonGet>(
                    token_json_get,
                ),
                get_uuid: std::mem::transmute::<*mut c_void, CryptGetUuid>(get_uuid),
            })
        }
    }
}

/// A symbol's address in `scope` (a handle or `RTLD_DEFAULT`), if any.
fn lookup(scope: *mut c_void, name: &CStr) -> Option<*mut c_void> {
    // SAFETY: `scope` is a handle dlopen() returned or RTLD_DEFAULT, and
    // `name` is NUL-terminated; dlsym() only reads them.
    let address = unsafe { libc::dlsym(scope, name.as_ptr()) };
    (!address.is_null()).then_some(address)
}

/// Keeps the shared object holding `address` loaded for the life of the
/// process (it is already loaded: RTLD_NOLOAD).
fn pin_object_of(address: *mut c_void) {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: `info` is a writable Dl_info; dladdr() fills it when it
    // returns non-zero.
    let found = unsafe { libc::dladdr(address.cast_const(), info.as_mut_ptr()) };
    if found == 0 {
        return;
    }
    // SAFETY: dladdr() succeeded, so `info` is initialised; its file name
    // is null or a NUL-terminated string owned by the loader.
    let file = unsafe { info.assume_init() }.dli_fname;
    if !file.is_null() {
        let flags = libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_NODELETE;
        // SAFETY: as in Api::resolve; the handle is deliberately kept.
        unsafe { libc::dlopen(file, flags) };
    }
}

/// Messages through `crypt_log` of the device the library called us for
/// (dropped when libcryptsetup's functions could not be found).
struct DeviceLog(*mut CryptDevice);

impl Log for DeviceLog {
    fn line(&self, level: Level, text: &str) {
        let Some(api) = Api::get() else { return };
        let level = match level {
            Level::Normal => CRYPT_LOG_NORMAL,
            Level::Error => CRYPT_LOG_ERROR,
            Level::Verbose => CRYPT_LOG_VERBOSE,
            Level::Debug => CRYPT_LOG_DEBUG,
        };
        // crypt_log() prints its message as is: the line needs its end.
        let mut bytes: Vec<u8> = text.bytes().filter(|b| *b != 0).collect();
        bytes.push(b'\n');
        let Ok(line) = CString::new(bytes) else { return };
        // SAFETY: `line` is a NUL-terminated string alive for the call;
        // the handle is the one the library passed to the current ABI
        // call (crypt_log also accepts NULL).
        unsafe { (api.log)(self.0, level, line.as_ptr()) }
    }
}

/// Runs an ABI body; a panic (a bug) becomes `failed` instead of
/// unwinding into C.
fn guard<T>(failed: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(failed)
}

/// Copies a C string the library lends us.
///
/// # Safety
/// `text` is null or points to a NUL-terminated string that stays valid
/// for the duration of the call.
unsafe fn borrowed_text(text: *const c_char) -> Option<String> {
    if text.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    let text = unsafe { CStr::from_ptr(text) };
    text.to_str().ok().map(str::to_owned)
}

extern "C" fn token_open(
    cd: *mut CryptDevice,
    token: c_int,
    buffer: *mut *mut c_char,
    buffer_len: *mut usize,
    _usrptr: *mut c_void,
) -> c_int {
    guard(-libc::EINVAL, || {
        if cd.is_null() || buffer.is_null() || buffer_len.is_null() {
            return -libc::EINVAL;
        }
        let Ok(id) = usize::try_from(token) else { return -libc::EINVAL };
        // Not loaded by libcryptsetup: this token cannot be used here.
        let Some(api) = Api::get() else { return -libc::ENOENT };
        let log = DeviceLog(cd);
        let mut json: *const c_char = std::ptr::null();
        // SAFETY: `cd` is the live handle of this call; `json` is a valid
        // place for the library to store a pointer into its own header
        // copy, which stays valid while the header is not changed (for
        // this call: we copy it at once).
        let found = unsafe { (api.token_json_get)(cd, token, &raw mut json) };
        if found < 0 {
            return found;
        }
        // SAFETY: on success the library set `json` to a NUL-terminated
        // string it owns (see above).
        let Some(json) = (unsafe { borrowed_text(json) }) else { return -libc::EINVAL };
        // SAFETY: `cd` is live; crypt_get_uuid returns null or a string
        // owned by the handle.
        let Some(uuid) = (unsafe { borrowed_text((api.get_uuid)(cd)) }) else {
            return -libc::EINVAL;
        };
        let passphrase = match crate::open(id, &json, &uuid, &log) {
            Ok(passphrase) => passphrase,
            Err(error) => return error.errno(),
        };
        let secret = passphrase.expose();
        // malloc(), not a Rust allocation: the library frees with free()
        // when a plugin has no buffer_free, and with ours otherwise.
        // SAFETY: plain allocation of a non-zero size (checked below).
        let out = unsafe { libc::malloc(secret.len().max(1)) }.cast::<u8>();
        if out.is_null() {
            return -libc::ENOMEM;
        }
        // SAFETY: `out` has room for `secret.len()` bytes and does not
        // overlap `secret`; `buffer` and `buffer_len` are non-null
        // out-parameters of the caller.
        unsafe {
            std::ptr::copy_nonoverlapping(secret.as_ptr(), out, secret.len());
            *buffer = out.cast::<c_char>();
            *buffer_len = secret.len();
        }
        0
    })
}

/// Bindings need no PIN: a PIN given is not used.
extern "C" fn token_open_pin(
    cd: *mut CryptDevice,
    token: c_int,
    _pin: *const c_char,
    _pin_size: usize,
    buffer: *mut *mut c_char,
    buffer_len: *mut usize,
    usrptr: *mut c_void,
) -> c_int {
    token_open(cd, token, buffer, buffer_len, usrptr)
}

extern "C" fn token_buffer_free(buffer: *mut c_void, buffer_len: usize) {
    guard((), || {
        if buffer.is_null() {
            return;
        }
        // SAFETY: `buffer` is the `buffer_len`-byte malloc() allocation
        // that token_open handed out, returned once by the library.
        unsafe {
            std::slice::from_raw_parts_mut(buffer.cast::<u8>(), buffer_len).zeroize();
            libc::free(buffer);
        }
    });
}

extern "C" fn token_validate(cd: *mut CryptDevice, json: *const c_char) -> c_int {
    guard(-libc::EINVAL, || {
        // SAFETY: the library passes a NUL-terminated JSON string alive
        // for the call.
        let Some(json) = (unsafe { borrowed_text(json) }) else { return -libc::EINVAL };
        match crate::validate(&json) {
            Ok(()) => 0,
            Err(why) => {
                DeviceLog(cd).line(
                    Level::Error,
                    &format!("Invalid {} token: {why}.", rampart_kms_client::binding::TOKEN_TYPE),
                );
                -libc::EINVAL
            }
        }
    })
}

extern "C" fn token_dump(cd: *mut CryptDevice, json: *const c_char) {
    guard((), || {
        // SAFETY: as in token_validate.
        if let Some(json) = unsafe { borrowed_text(json) } {
            crate::dump(&json, &DeviceLog(cd));
        }
    });
}

/// The version string, NUL-terminated, static.
static VERSION_C: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(text) => text,
        Err(_) => panic!("the package version contains a NUL"),
    };

extern "C" fn token_version() -> *const c_char {
    VERSION_C.as_ptr()
}

// The exported entry points: one direct jump each to the Rust function
// (same signature, so arguments and the return address pass untouched).
macro_rules! entry_points {
    ($($name:literal => $target:ident),* $(,)?) => {
        #[cfg(target_arch = "x86_64")]
        std::arch::global_asm!(
            $(
                concat!(".globl ", $name),
                concat!(".type ", $name, ",@function"),
                concat!($name, ":"),
                concat!("jmp {", stringify!($target), "}"),
                concat!(".size ", $name, ", .-", $name),
            )*
            $($target = sym $target,)*
        );
        #[cfg(target_arch = "aarch64")]
        std::arch::global_asm!(
            $(
                concat!(".globl ", $name),
                concat!(".type ", $name, ",%function"),
                concat!($name, ":"),
                concat!("b {", stringify!($target), "}"),
                concat!(".size ", $name, ", .-", $name),
            )*
            $($target = sym $target,)*
        );
    };
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("the token plugin's entry points are written for x86_64 and aarch64");

entry_points! {
    "cryptsetup_token_open" => token_open,
    "cryptsetup_token_open_pin" => token_open_pin,
    "cryptsetup_token_buffer_free" => token_buffer_free,
    "cryptsetup_token_validate" => token_validate,
    "cryptsetup_token_dump" => token_dump,
    "cryptsetup_token_version" => token_version,
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &CStr = c"{\"type\":\"rampart-kms\",\"keyslots\":[\"1\"],\"wrapped\":\"rampart:v1:disk:2:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}";

    /// A test process has no libcryptsetup: every entry point must fail
    /// (or do without logging) rather than call through a null pointer.
    #[test]
    fn without_libcryptsetup_the_entry_points_fail_cleanly() {
        if Api::get().is_some() {
            return; // libcryptsetup is in this process after all
        }
        // Never dereferenced: the entry points stop before any call.
        let cd = std::ptr::NonNull::<CryptDevice>::dangling().as_ptr();
        let mut buffer: *mut c_char = std::ptr::null_mut();
        let mut len = 0usize;
        let opened = token_open(cd, 0, &raw mut buffer, &raw mut len, std::ptr::null_mut());
        assert_eq!(opened, -libc::ENOENT);
        assert!(buffer.is_null());
        assert_eq!(len, 0);
        assert_eq!(token_validate(cd, TOKEN.as_ptr()), 0);
        assert_eq!(token_validate(cd, c"{}".as_ptr()), -libc::EINVAL);
        token_dump(cd, TOKEN.as_ptr());
        assert_eq!(
            token_open(cd, 0, std::ptr::null_mut(), &raw mut len, std::ptr::null_mut()),
            -libc::EINVAL
        );
    }
}
