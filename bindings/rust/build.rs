// SPDX-License-Identifier: MIT OR Apache-2.0
// Links libtickwheel.so (the C API). TICKWHEEL_LIB_DIR names the directory
// holding it (ctest capi_rust sets it to the build tree's capi/); it is also
// put in the RPATH of what we build, so tests run without LD_LIBRARY_PATH.
// Without it, the system's library search path is used (an installed
// libtickwheel, e.g. under /usr/lib or /usr/local/lib).
fn main() {
    println!("cargo:rerun-if-env-changed=TICKWHEEL_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    if let Ok(dir) = std::env::var("TICKWHEEL_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    println!("cargo:rustc-link-lib=dylib=tickwheel");
}
