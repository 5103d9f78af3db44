//! The declarations of include/wick/wick_c.h that this program calls, by hand (no bindgen, no
//! crates): the status, dtype and device types, and the functions.
#![allow(non_camel_case_types, dead_code)]

use std::os::raw::{c_char, c_int, c_void};

pub type wick_status = c_int;
pub const WICK_OK: wick_status = 0;
pub const WICK_ERROR_ARGUMENT: wick_status = 1;
pub const WICK_ERROR_SHAPE: wick_status = 2;
pub const WICK_ERROR_DTYPE: wick_status = 3;
pub const WICK_ERROR_DEVICE: wick_status = 4;

pub type wick_dtype = c_int;
pub const WICK_I64: wick_dtype = 4;
pub const WICK_F32: wick_dtype = 7;

pub const WICK_DEVICE_CPU: i32 = 0;
pub const WICK_DEVICE_CUDA: i32 = 1;

pub const WICK_ADD: c_int = 0;
pub const WICK_MUL: c_int = 2;
pub const WICK_SUM: c_int = 0;
pub const WICK_MAX: c_int = 2;
pub const WICK_SILU: c_int = 14;

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct wick_device {
    pub type_: i32,
    pub index: i32,
}

#[repr(C)]
pub struct wick_tensor {
    _opaque: [u8; 0],
}

#[repr(C)]
pub struct wick_model {
    _opaque: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct wick_generate_options {
    pub max_tokens: i64,
    pub temperature: f64,
    pub top_k: i64,
    pub top_p: f64,
    pub min_p: f64,
    pub repetition_penalty: f64,
    pub seed: u64,
    pub presence_penalty: f64,
    pub frequency_penalty: f64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct wick_generate_stats {
    pub prompt_tokens: i64,
    pub generated_tokens: i64,
    pub prompt_seconds: f64,
    pub generate_seconds: f64,
}

pub type wick_token_callback =
    Option<unsafe extern "C" fn(text: *const c_char, len: usize, token: i32, user: *mut c_void) -> c_int>;

extern "C" {
    pub fn wick_version() -> *const c_char;
    pub fn wick_c_abi_version() -> c_int;
    pub fn wick_last_error() -> *const c_char;
    pub fn wick_device_count(type_: i32, out: *mut c_int) -> wick_status;

    pub fn wick_tensor_free(t: *mut wick_tensor);
    pub fn wick_tensor_from_host(
        data: *const c_void,
        nbytes: usize,
        dtype: wick_dtype,
        shape: *const i64,
        rank: c_int,
        device: wick_device,
        out: *mut *mut wick_tensor,
    ) -> wick_status;
    pub fn wick_tensor_from_blob(
        data: *mut c_void,
        shape: *const i64,
        strides: *const i64,
        rank: c_int,
        dtype: wick_dtype,
        device: wick_device,
        release: Option<unsafe extern "C" fn(ctx: *mut c_void)>,
        ctx: *mut c_void,
        out: *mut *mut wick_tensor,
    ) -> wick_status;
    pub fn wick_tensor_rank(t: *const wick_tensor, out: *mut c_int) -> wick_status;
    pub fn wick_tensor_shape(t: *const wick_tensor, out: *mut i64) -> wick_status;
    pub fn wick_tensor_numel(t: *const wick_tensor, out: *mut i64) -> wick_status;
    pub fn wick_tensor_dtype(t: *const wick_tensor, out: *mut wick_dtype) -> wick_status;
    pub fn wick_tensor_to_host(t: *const wick_tensor, dst: *mut c_void, nbytes: usize) -> wick_status;
    pub fn wick_tensor_to_device(t: *const wick_tensor, device: wick_device, out: *mut *mut wick_tensor)
        -> wick_status;
    pub fn wick_tensor_format(t: *const wick_tensor, buf: *mut c_char, cap: usize, len: *mut usize) -> wick_status;

    pub fn wick_unary(op: c_int, x: *const wick_tensor, out: *mut *mut wick_tensor) -> wick_status;
    pub fn wick_binary(op: c_int, a: *const wick_tensor, b: *const wick_tensor, out: *mut *mut wick_tensor)
        -> wick_status;
    pub fn wick_reduce(
        op: c_int,
        x: *const wick_tensor,
        dims: *const i64,
        ndims: c_int,
        keepdim: c_int,
        out: *mut *mut wick_tensor,
    ) -> wick_status;
    pub fn wick_matmul(a: *const wick_tensor, b: *const wick_tensor, out: *mut *mut wick_tensor) -> wick_status;
    pub fn wick_transpose(t: *const wick_tensor, d0: i64, d1: i64, out: *mut *mut wick_tensor) -> wick_status;
    pub fn wick_softmax(x: *const wick_tensor, dim: i64, out: *mut *mut wick_tensor) -> wick_status;

    pub fn wick_model_open(path: *const c_char, device: wick_device, dtype: wick_dtype, out: *mut *mut wick_model)
        -> wick_status;
    pub fn wick_model_free(m: *mut wick_model);
    pub fn wick_generate_defaults() -> wick_generate_options;
    pub fn wick_model_generate(
        m: *const wick_model,
        prompt: *const c_char,
        options: *const wick_generate_options,
        on_token: wick_token_callback,
        user: *mut c_void,
        stats: *mut wick_generate_stats,
    ) -> wick_status;
}
