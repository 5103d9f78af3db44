// Links libwick.so from WICK_LIB_DIR (an installed prefix's lib/, or a build tree's lib/), and
// records it as the run-time search path so that the program runs without LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=WICK_LIB_DIR");
    if let Ok(dir) = std::env::var("WICK_LIB_DIR") {
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
    println!("cargo:rustc-link-lib=dylib=wick");
}
