//! Links the plugin with its version script: only cryptsetup's token ABI
//! symbols are exported, under the version node cryptsetup asks for with
//! dlvsym(), CRYPTSETUP_TOKEN_1.0.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let script = format!("{dir}/cryptsetup-token.map");
    println!("cargo:rerun-if-changed=cryptsetup-token.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={script}");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcryptsetup-token-rampart-kms.so");
}
