//! The module's soname is the installed name, librampart-pkcs11.so.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,librampart-pkcs11.so");
}
