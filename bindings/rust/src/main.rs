//! wick from Rust through its C API alone: a safe `Tensor` over the handles, errors as
//! `Result`, memory shared with a Rust `Vec` without a copy, and the model runner with a closure
//! per token. Run with the tiny model's path to include generation:
//!
//!     WICK_LIB_DIR=/prefix/lib cargo run --release -- models/tiny.gguf
//!
//! Prints one line per failed check and a summary; exits 1 on any failure.
mod ffi;

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

/// A failed call: wick's status and its message (op, shapes, dtypes, device).
#[derive(Debug)]
pub struct Error {
    pub status: ffi::wick_status,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wick status {}: {}", self.status, self.message)
    }
}

fn check(status: ffi::wick_status) -> Result<(), Error> {
    if status == ffi::WICK_OK {
        return Ok(());
    }
    let message = unsafe { CStr::from_ptr(ffi::wick_last_error()) }.to_string_lossy().into_owned();
    Err(Error { status, message })
}

pub const CPU: ffi::wick_device = ffi::wick_device { type_: ffi::WICK_DEVICE_CPU, index: 0 };

/// One wick tensor handle, released on drop.
pub struct Tensor(*mut ffi::wick_tensor);

impl Drop for Tensor {
    fn drop(&mut self) {
        unsafe { ffi::wick_tensor_free(self.0) }
    }
}

/// Calls a C function that hands out one new tensor.
fn make(f: impl FnOnce(*mut *mut ffi::wick_tensor) -> ffi::wick_status) -> Result<Tensor, Error> {
    let mut out = ptr::null_mut();
    check(f(&mut out))?;
    Ok(Tensor(out))
}

impl Tensor {
    pub fn from_f32(data: &[f32], shape: &[i64], device: ffi::wick_device) -> Result<Tensor, Error> {
        make(|out| unsafe {
            ffi::wick_tensor_from_host(
                data.as_ptr() as *const c_void,
                std::mem::size_of_val(data),
                ffi::WICK_F32,
                shape.as_ptr(),
                shape.len() as c_int,
                device,
                out,
            )
        })
    }

    /// A tensor over a Vec's memory, without a copy; the Vec lives until wick lets it go.
    pub fn from_vec(data: Vec<f32>, shape: &[i64]) -> Result<Tensor, Error> {
        unsafe extern "C" fn release(ctx: *mut c_void) {
            drop(Box::from_raw(ctx as *mut Vec<f32>));
        }
        let mut boxed = Box::new(data);
        let p = boxed.as_mut_ptr() as *mut c_void;
        let ctx = Box::into_raw(boxed) as *mut c_void;
        make(|out| unsafe {
            ffi::wick_tensor_from_blob(p, shape.as_ptr(), ptr::null(), shape.len() as c_int, ffi::WICK_F32, CPU,
                                       Some(release), ctx, out)
        })
    }

    pub fn shape(&self) -> Result<Vec<i64>, Error> {
        let mut rank: c_int = 0;
        check(unsafe { ffi::wick_tensor_rank(self.0, &mut rank) })?;
        let mut shape = vec![0i64; rank as usize];
        check(unsafe { ffi::wick_tensor_shape(self.0, shape.as_mut_ptr()) })?;
        Ok(shape)
    }

    pub fn to_vec_f32(&self) -> Result<Vec<f32>, Error> {
        let mut n = 0i64;
        check(unsafe { ffi::wick_tensor_numel(self.0, &mut n) })?;
        let mut v = vec![0f32; n as usize];
        check(unsafe { ffi::wick_tensor_to_host(self.0, v.as_mut_ptr() as *mut c_void, v.len() * 4) })?;
        Ok(v)
    }

    pub fn to_device(&self, device: ffi::wick_device) -> Result<Tensor, Error> {
        make(|out| unsafe { ffi::wick_tensor_to_device(self.0, device, out) })
    }
    pub fn add(&self, rhs: &Tensor) -> Result<Tensor, Error> {
        make(|out| unsafe { ffi::wick_binary(ffi::WICK_ADD, self.0, rhs.0, out) })
    }
    pub fn mul(&self, rhs: &Tensor) -> Result<Tensor, Error> {
        make(|out| unsafe { ffi::wick_binary(ffi::WICK_MUL, self.0, rhs.0, out) })
    }
    pub fn silu(&self) -> Result<Tensor, Error> {
        make(|out| unsafe { ffi::wick_unary(ffi::WICK_SILU, self.0, out) })
    }
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor, Error> {
        make(|out| unsafe { ffi::wick_matmul(self.0, rhs.0, out) })
    }
    pub fn t(&self) -> Result<Tensor, Error> {
        make(|out| unsafe { ffi::wick_transpose(self.0, -2, -1, out) })
    }
    pub fn softmax(&self, dim: i64) -> Result<Tensor, Error> {
        make(|out| unsafe { ffi::wick_softmax(self.0, dim, out) })
    }
    pub fn sum(&self, dims: &[i64]) -> Result<Tensor, Error> {
        make(|out| unsafe { ffi::wick_reduce(ffi::WICK_SUM, self.0, dims.as_ptr(), dims.len() as c_int, 0, out) })
    }
}

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut len = 0usize;
        let _ = check(unsafe { ffi::wick_tensor_format(self.0, ptr::null_mut(), 0, &mut len) });
        let mut buf = vec![0u8; len + 1];
        let _ = check(unsafe { ffi::wick_tensor_format(self.0, buf.as_mut_ptr() as *mut c_char, buf.len(), &mut len) });
        buf.truncate(len);
        write!(f, "{}", String::from_utf8_lossy(&buf))
    }
}

/// A model and its tokenizer; generate() calls `each` with every piece of text.
pub struct Model(*mut ffi::wick_model);

impl Drop for Model {
    fn drop(&mut self) {
        unsafe { ffi::wick_model_free(self.0) }
    }
}

impl Model {
    pub fn open(path: &str, device: ffi::wick_device) -> Result<Model, Error> {
        let p = CString::new(path).expect("a path without NUL");
        let mut out = ptr::null_mut();
        check(unsafe { ffi::wick_model_open(p.as_ptr(), device, ffi::WICK_F32, &mut out) })?;
        Ok(Model(out))
    }

    pub fn generate<F: FnMut(&str) -> bool>(&self, prompt: &str, max_tokens: i64, mut each: F)
        -> Result<ffi::wick_generate_stats, Error> {
        unsafe extern "C" fn trampoline<F: FnMut(&str) -> bool>(text: *const c_char, len: usize, _token: i32,
                                                                  user: *mut c_void) -> c_int {
            let f = &mut *(user as *mut F);
            let bytes = std::slice::from_raw_parts(text as *const u8, len);
            if f(&String::from_utf8_lossy(bytes)) { 0 } else { 1 }
        }
        let p = CString::new(prompt).expect("a prompt without NUL");
        let mut o = unsafe { ffi::wick_generate_defaults() };
        o.max_tokens = max_tokens;
        let mut stats = ffi::wick_generate_stats::default();
        check(unsafe {
            ffi::wick_model_generate(self.0, p.as_ptr(), &o, Some(trampoline::<F>), &mut each as *mut F as *mut c_void,
                                     &mut stats)
        })?;
        Ok(stats)
    }
}

struct Checks {
    run: u32,
    failed: u32,
}

impl Checks {
    fn check(&mut self, ok: bool, what: &str) {
        self.run += 1;
        if !ok {
            self.failed += 1;
            println!("FAILED {}", what);
        }
    }
}

fn run(c: &mut Checks, model: Option<String>) -> Result<(), Error> {
    let version = unsafe { CStr::from_ptr(ffi::wick_version()) }.to_string_lossy().into_owned();
    c.check(!version.is_empty() && unsafe { ffi::wick_c_abi_version() } == 2, "version and ABI version");

    let a = Tensor::from_f32(&[1., 2., 3., 4., 5., 6.], &[2, 3], CPU)?;
    let b = Tensor::from_f32(&[0.5, -1., 2.], &[3], CPU)?;
    let s = a.add(&b)?.sum(&[1])?;
    c.check(s.shape()? == vec![2] && s.to_vec_f32()? == vec![7.5, 16.5], "(a + b).sum(1)");
    let m = a.matmul(&a.t()?)?;
    c.check(m.to_vec_f32()? == vec![14., 32., 32., 77.], "a @ a^T");
    let p = m.softmax(-1)?.to_vec_f32()?;
    c.check((p[0] + p[1] - 1.0).abs() < 1e-6 && p[1] > p[0], "softmax rows sum to 1");
    c.check(format!("{}", s) == "tensor([ 7.5000, 16.5000], dtype=f32)", "Display through wick_tensor_format");

    // Errors come back as values, with wick's message.
    match a.mul(&Tensor::from_f32(&[1., 2., 3., 4.], &[4], CPU)?) {
        Err(e) => c.check(e.status == ffi::WICK_ERROR_SHAPE && e.message.contains("mul") && e.message.contains("[2, 3]"),
                          "a shape error names the op and the shapes"),
        Ok(_) => c.check(false, "mul of [2, 3] and [4] fails"),
    }
    match a.to_device(ffi::wick_device { type_: ffi::WICK_DEVICE_CUDA, index: 1000 }) {
        Err(e) => c.check(e.status == ffi::WICK_ERROR_DEVICE && e.message.contains("cuda:1000"), "a device error"),
        Ok(_) => c.check(false, "no cuda:1000"),
    }

    // A Vec's memory shared without a copy; wick gives it back when the last handle goes.
    let v = Tensor::from_vec(vec![-1., 0., 1., 2.], &[2, 2])?;
    let y = v.silu()?.to_vec_f32()?;
    let silu = |x: f32| x / (1.0 + (-x).exp());
    c.check(y.iter().zip([-1f32, 0., 1., 2.]).all(|(g, x)| (g - silu(x)).abs() <= 1e-6), "silu of a shared Vec");

    // The same on every GPU present.
    let mut gpus: c_int = 0;
    check(unsafe { ffi::wick_device_count(ffi::WICK_DEVICE_CUDA, &mut gpus) })?;
    for i in 0..gpus {
        let d = ffi::wick_device { type_: ffi::WICK_DEVICE_CUDA, index: i };
        let g = a.to_device(d)?.add(&b.to_device(d)?)?.sum(&[1])?;
        c.check(g.to_vec_f32()? == vec![7.5, 16.5], "(a + b).sum(1) on a GPU");
    }

    if let Some(path) = model {
        let model = Model::open(&path, CPU)?;
        let mut text = String::new();
        let stats = model.generate("Hello world", 8, |piece| {
            text.push_str(piece);
            true
        })?;
        c.check(stats.generated_tokens >= 1 && stats.generated_tokens <= 8 && stats.prompt_tokens > 1,
                "generate on the model");
        println!("generated {} tokens: {:?}", stats.generated_tokens, text);
    }
    Ok(())
}

fn main() {
    let mut c = Checks { run: 0, failed: 0 };
    if let Err(e) = run(&mut c, std::env::args().nth(1)) {
        c.check(false, &format!("unexpected error: {}", e));
    }
    println!("Rust caller: {} checks, {} failed", c.run, c.failed);
    std::process::exit(if c.failed == 0 { 0 } else { 1 });
}
