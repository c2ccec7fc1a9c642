//! AES-XTS on the CPU's AES instructions: VAES on 512-bit (AVX-512) or
//! 256-bit (AVX2) vectors, or AES-NI on 128-bit ones.
//!
//! One call transforms any number of consecutive sectors. Within a sector,
//! eight vectors of blocks go through the AES rounds together, so the AES
//! units always have independent work; the tweaks of those blocks are kept
//! in registers and advanced by multiplication by a power of α in GF(2^128)
//! (shift plus a carry-less multiply by the reduction constant 0x87). The
//! first tweaks of eight sectors are encrypted together as well.
//!
//! Constant time: no branch and no memory address depends on a key, a tweak
//! or the data; only on lengths and the sector count.
//!
//! The code is written once, generic over [`Lanes`] (a vector of 1, 2 or 4
//! AES blocks). Every function of it is `#[inline(always)]` and is compiled
//! into one of the `#[target_feature]` entry points at the bottom, which are
//! only called after [`Path::available`] saw those features on this CPU.
#![allow(unsafe_code)]

use core::arch::x86_64::{
    __m128i, __m256i, __m512i, _mm256_aesdec_epi128, _mm256_aesdeclast_epi128,
    _mm256_aesenc_epi128, _mm256_aesenclast_epi128, _mm256_broadcastsi128_si256,
    _mm256_bslli_epi128, _mm256_castsi256_si128, _mm256_clmulepi64_epi128, _mm256_loadu_si256,
    _mm256_set_epi64x, _mm256_sllv_epi64, _mm256_srlv_epi64, _mm256_storeu_si256, _mm256_sub_epi64,
    _mm256_xor_si256, _mm512_aesdec_epi128, _mm512_aesdeclast_epi128, _mm512_aesenc_epi128,
    _mm512_aesenclast_epi128, _mm512_broadcast_i32x4, _mm512_bslli_epi128, _mm512_castsi512_si128,
    _mm512_clmulepi64_epi128, _mm512_loadu_si512, _mm512_set1_epi64, _mm512_set_epi64,
    _mm512_sllv_epi64, _mm512_srlv_epi64, _mm512_storeu_si512, _mm512_sub_epi64,
    _mm512_ternarylogic_epi64, _mm512_xor_si512, _mm_aesdec_si128, _mm_aesdeclast_si128,
    _mm_aesenc_si128, _mm_aesenclast_si128, _mm_aesimc_si128, _mm_aeskeygenassist_si128,
    _mm_clmulepi64_si128, _mm_cvtsi128_si64x, _mm_cvtsi32_si128, _mm_cvtsi64_si128,
    _mm_loadu_si128, _mm_set_epi64x, _mm_setzero_si128, _mm_shuffle_epi32, _mm_sll_epi64,
    _mm_slli_epi64, _mm_slli_si128, _mm_srl_epi64, _mm_srli_epi64, _mm_storeu_si128, _mm_xor_si128,
};

use zeroize::Zeroize;

/// The instruction sets the engine can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    Vaes512,
    Vaes256,
    AesNi,
}

impl Path {
    /// Whether this CPU has every feature the path's entry points enable.
    pub(crate) fn available(self) -> bool {
        use std::arch::is_x86_feature_detected as has;
        let aes_ni = has!("aes") && has!("pclmulqdq") && has!("sse2");
        match self {
            Self::AesNi => aes_ni,
            Self::Vaes256 => aes_ni && has!("avx2") && has!("vaes") && has!("vpclmulqdq"),
            Self::Vaes512 => {
                aes_ni && has!("avx512f") && has!("avx512bw") && has!("vaes") && has!("vpclmulqdq")
            }
        }
    }
}

/// Expanded AES keys of one XTS key: the data key for encryption and for
/// decryption (the equivalent inverse cipher's round keys), and the tweak
/// key for encryption. Boxed by its owner and wiped on drop.
#[derive(Clone)]
pub(crate) struct Schedule {
    /// Checked available on this CPU when the schedule was made.
    path: Path,
    /// 10 (AES-128) or 14 (AES-256).
    rounds: usize,
    enc: [u128; 15],
    dec: [u128; 15],
    tweak: [u128; 15],
}

impl Drop for Schedule {
    fn drop(&mut self) {
        self.enc.zeroize();
        self.dec.zeroize();
        self.tweak.zeroize();
    }
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedule")
            .field("path", &self.path)
            .field("rounds", &self.rounds)
            .finish_non_exhaustive()
    }
}

impl Schedule {
    /// Expands `key` = key1 || key2 (32 or 64 bytes) for `path`. Returns
    /// `None` when this CPU lacks the path's instructions or the key length
    /// is wrong.
    pub(crate) fn new(key: &[u8], path: Path) -> Option<Box<Self>> {
        if !path.available() || !Path::AesNi.available() || (key.len() != 32 && key.len() != 64) {
            return None;
        }
        let half = key.len() / 2;
        let mut schedule =
            Box::new(Self { path, rounds: 0, enc: [0; 15], dec: [0; 15], tweak: [0; 15] });
        // SAFETY: AES-NI and SSE2 were detected just above; `expand` reads
        // exactly `half` (16 or 32) bytes from each slice it is given.
        unsafe {
            schedule.rounds = expand(&key[..half], &mut schedule.enc);
            expand(&key[half..], &mut schedule.tweak);
            invert(&schedule.enc, &mut schedule.dec, schedule.rounds);
        }
        Some(schedule)
    }
}

impl Schedule {
    pub(crate) fn path(&self) -> Path {
        self.path
    }

    /// Transforms whole sectors of `data` in place; sector `i` uses the
    /// plain64 tweak `first + i * step` (wrapping). The caller checked that
    /// `sector` is a non-zero multiple of 16 dividing `data.len()`.
    pub(crate) fn sectors_in_place(
        &self,
        data: &mut [u8],
        sector: usize,
        first: u64,
        step: u64,
        encrypt: bool,
    ) {
        assert!(sector != 0 && sector.is_multiple_of(16) && data.len().is_multiple_of(sector));
        let job = Job {
            src: data.as_ptr(),
            dst: data.as_mut_ptr(),
            len: data.len(),
            sector,
            first,
            step,
        };
        // SAFETY: `self.path` was checked available when `self` was made;
        // `data` is one live slice of `len` bytes (src == dst is allowed);
        // the sector size was asserted just above.
        unsafe { sectors(self.path, self, job, encrypt) }
    }

    /// As [`Schedule::sectors_in_place`], from `src` into `dst` (same length).
    pub(crate) fn sectors_apart(
        &self,
        src: &[u8],
        dst: &mut [u8],
        sector: usize,
        first: u64,
        step: u64,
        encrypt: bool,
    ) {
        assert!(
            sector != 0
                && sector.is_multiple_of(16)
                && src.len().is_multiple_of(sector)
                && src.len() == dst.len()
        );
        let job =
            Job { src: src.as_ptr(), dst: dst.as_mut_ptr(), len: src.len(), sector, first, step };
        // SAFETY: as above; `src` and `dst` are distinct live borrows, so
        // they cannot overlap, and both hold `len` bytes (asserted).
        unsafe { sectors(self.path, self, job, encrypt) }
    }

    /// One data unit of any length ≥ 16 in place, with ciphertext stealing.
    pub(crate) fn unit_in_place(&self, data: &mut [u8], tweak: &[u8; 16], encrypt: bool) {
        assert!(data.len() >= 16);
        let job = Job {
            src: data.as_ptr(),
            dst: data.as_mut_ptr(),
            len: data.len(),
            sector: data.len(),
            first: 0,
            step: 0,
        };
        // SAFETY: path available (checked at construction); one live slice
        // of at least 16 bytes (asserted), in place.
        unsafe { unit(self.path, self, job, tweak, encrypt) }
    }
}

/// Transforms `len / sector` sectors from `src` to `dst` (which may be the
/// same pointer, for in place). Sector `i` uses the plain64 tweak
/// `first + i * step` (wrapping).
///
/// # Safety
/// `path.available()` is true; `src` is readable and `dst` writable for
/// `len` bytes, and they are equal or do not overlap; `sector` is a
/// non-zero multiple of 16 and `len` a multiple of `sector`.
unsafe fn sectors(path: Path, keys: &Schedule, job: Job, encrypt: bool) {
    // SAFETY: forwarded from this function's contract; each entry point's
    // features are implied by `path.available()`.
    unsafe {
        match path {
            Path::Vaes512 => sectors_vaes512(keys, job, encrypt),
            Path::Vaes256 => sectors_vaes256(keys, job, encrypt),
            Path::AesNi => sectors_aesni(keys, job, encrypt),
        }
    }
}

/// One data unit of any length ≥ 16 with a full 128-bit tweak, with
/// ciphertext stealing for a partial last block (IEEE 1619 5.3.2/5.4.2).
///
/// # Safety
/// As [`sectors`], with `job.sector == job.len` (one unit, any length ≥ 16)
/// and `first`/`step` unused.
unsafe fn unit(path: Path, keys: &Schedule, job: Job, tweak: &[u8; 16], encrypt: bool) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        match path {
            Path::Vaes512 => unit_vaes512(keys, job, tweak, encrypt),
            Path::Vaes256 => unit_vaes256(keys, job, tweak, encrypt),
            Path::AesNi => unit_aesni(keys, job, tweak, encrypt),
        }
    }
}

/// Where and what to transform; see [`sectors`] for the contract.
#[derive(Debug, Clone, Copy)]
struct Job {
    src: *const u8,
    dst: *mut u8,
    len: usize,
    sector: usize,
    first: u64,
    step: u64,
}

// ---------------------------------------------------------------------------
// Key expansion (FIPS 197 section 5.2, computed with AESKEYGENASSIST).

/// Expands a 16- or 32-byte AES key into `out`; returns the round count.
///
/// # Safety
/// The CPU has AES-NI and SSE2; `key` is 16 or 32 bytes.
#[target_feature(enable = "aes,sse2")]
unsafe fn expand(key: &[u8], out: &mut [u128; 15]) -> usize {
    // One step of the schedule: w ^= w << 32 ^ w << 64 ^ w << 96, then the
    // assist word (already broadcast to all four columns).
    let step = |w: __m128i, assist: __m128i| {
        let mut w = w;
        w = _mm_xor_si128(w, _mm_slli_si128::<4>(w));
        w = _mm_xor_si128(w, _mm_slli_si128::<4>(w));
        w = _mm_xor_si128(w, _mm_slli_si128::<4>(w));
        _mm_xor_si128(w, assist)
    };
    macro_rules! assist {
        ($w:expr, $rcon:literal, $col:literal) => {
            _mm_shuffle_epi32::<$col>(_mm_aeskeygenassist_si128::<$rcon>($w))
        };
    }
    let store = |out: &mut [u128; 15], i: usize, w: __m128i| {
        let mut bytes = [0u8; 16];
        // SAFETY: `bytes` is 16 writable bytes.
        unsafe { _mm_storeu_si128(bytes.as_mut_ptr().cast(), w) };
        out[i] = u128::from_le_bytes(bytes);
        bytes.zeroize();
    };
    // SAFETY: the caller guarantees `key` holds at least 16 bytes (32 for
    // the AES-256 branch, which reads `key[16..]`).
    let mut a = unsafe { _mm_loadu_si128(key.as_ptr().cast()) };
    store(out, 0, a);
    if key.len() == 16 {
        a = step(a, assist!(a, 0x01, 0xff));
        store(out, 1, a);
        a = step(a, assist!(a, 0x02, 0xff));
        store(out, 2, a);
        a = step(a, assist!(a, 0x04, 0xff));
        store(out, 3, a);
        a = step(a, assist!(a, 0x08, 0xff));
        store(out, 4, a);
        a = step(a, assist!(a, 0x10, 0xff));
        store(out, 5, a);
        a = step(a, assist!(a, 0x20, 0xff));
        store(out, 6, a);
        a = step(a, assist!(a, 0x40, 0xff));
        store(out, 7, a);
        a = step(a, assist!(a, 0x80, 0xff));
        store(out, 8, a);
        a = step(a, assist!(a, 0x1b, 0xff));
        store(out, 9, a);
        a = step(a, assist!(a, 0x36, 0xff));
        store(out, 10, a);
        return 10;
    }
    // SAFETY: as above, 32 bytes.
    let mut b = unsafe { _mm_loadu_si128(key.as_ptr().add(16).cast()) };
    store(out, 1, b);
    macro_rules! pair {
        ($rcon:literal, $i:literal) => {
            a = step(a, assist!(b, $rcon, 0xff));
            store(out, $i, a);
            b = step(b, assist!(a, 0x00, 0xaa));
            store(out, $i + 1, b);
        };
    }
    pair!(0x01, 2);
    pair!(0x02, 4);
    pair!(0x04, 6);
    pair!(0x08, 8);
    pair!(0x10, 10);
    pair!(0x20, 12);
    a = step(a, assist!(b, 0x40, 0xff));
    store(out, 14, a);
    14
}

/// The decryption round keys of the equivalent inverse cipher (FIPS 197
/// section 5.3.5): the encryption keys reversed, InvMixColumns on the
/// inner ones.
///
/// # Safety
/// The CPU has AES-NI and SSE2.
#[target_feature(enable = "aes,sse2")]
unsafe fn invert(enc: &[u128; 15], dec: &mut [u128; 15], rounds: usize) {
    dec[0] = enc[rounds];
    dec[rounds] = enc[0];
    for i in 1..rounds {
        let mut bytes = enc[rounds - i].to_le_bytes();
        // SAFETY: `bytes` is 16 readable and writable bytes.
        unsafe {
            let k = _mm_aesimc_si128(_mm_loadu_si128(bytes.as_ptr().cast()));
            _mm_storeu_si128(bytes.as_mut_ptr().cast(), k);
        }
        dec[i] = u128::from_le_bytes(bytes);
        bytes.zeroize();
    }
}

// ---------------------------------------------------------------------------
// Vectors of AES blocks.

/// A vector of `BLOCKS` AES blocks and the operations XTS needs on it.
///
/// # Safety
/// Every method requires the CPU features of its implementation's path
/// (see [`Path::available`]); callers are the `#[target_feature]` entry
/// points, which guarantee it.
trait Lanes: Copy {
    const BLOCKS: usize;
    unsafe fn load(p: *const u8) -> Self;
    unsafe fn store(self, p: *mut u8);
    unsafe fn splat(block: __m128i) -> Self;
    unsafe fn xor(self, other: Self) -> Self;
    /// self ^ a ^ b.
    unsafe fn xor3(self, a: Self, b: Self) -> Self;
    unsafe fn enc(self, key: Self) -> Self;
    unsafe fn enc_last(self, key: Self) -> Self;
    unsafe fn dec(self, key: Self) -> Self;
    unsafe fn dec_last(self, key: Self) -> Self;
    /// Lane `l` = `t` · α^(`first` + `l`); `first` + `BLOCKS` ≤ 57.
    unsafe fn spread(t: __m128i, first: u32) -> Self;
    /// Every lane · α^(8 · `BLOCKS`): the tweaks of the next eight vectors.
    unsafe fn advance(self) -> Self;
    /// Block 0 of the vector.
    unsafe fn first(self) -> __m128i;
}

/// The low 64 bits of the XTS reduction polynomial x^128 + x^7 + x^2 + x + 1.
const POLY: i64 = 0x87;

#[derive(Clone, Copy)]
struct X1(__m128i);
#[derive(Clone, Copy)]
struct Y2(__m256i);
#[derive(Clone, Copy)]
struct Z4(__m512i);

/// `t` · α^n for n ≤ 56 (as a shift count in an XMM register), one block.
#[inline(always)]
unsafe fn mul_alpha_n(t: __m128i, n: u32) -> __m128i {
    // SAFETY: SSE2 and PCLMULQDQ are present (caller's contract).
    unsafe {
        let low = _mm_sll_epi64(t, _mm_cvtsi32_si128(n as i32));
        let carry = _mm_srl_epi64(t, _mm_cvtsi32_si128(64 - n as i32));
        // The bits shifted out of the top qword fold back in times 0x87; the
        // ones out of the low qword move into the high one.
        let folded = _mm_clmulepi64_si128::<0x01>(carry, _mm_cvtsi64_si128(POLY));
        _mm_xor_si128(_mm_xor_si128(low, folded), _mm_slli_si128::<8>(carry))
    }
}

impl Lanes for X1 {
    const BLOCKS: usize = 1;
    #[inline(always)]
    unsafe fn load(p: *const u8) -> Self {
        // SAFETY: the caller guarantees 16 readable bytes at `p`.
        Self(unsafe { _mm_loadu_si128(p.cast()) })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut u8) {
        // SAFETY: the caller guarantees 16 writable bytes at `p`.
        unsafe { _mm_storeu_si128(p.cast(), self.0) }
    }
    #[inline(always)]
    unsafe fn splat(block: __m128i) -> Self {
        Self(block)
    }
    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        // SAFETY: SSE2 (trait contract).
        Self(unsafe { _mm_xor_si128(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn xor3(self, a: Self, b: Self) -> Self {
        // SAFETY: SSE2 (trait contract).
        Self(unsafe { _mm_xor_si128(_mm_xor_si128(self.0, a.0), b.0) })
    }
    #[inline(always)]
    unsafe fn enc(self, key: Self) -> Self {
        // SAFETY: AES-NI (trait contract).
        Self(unsafe { _mm_aesenc_si128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn enc_last(self, key: Self) -> Self {
        // SAFETY: AES-NI (trait contract).
        Self(unsafe { _mm_aesenclast_si128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn dec(self, key: Self) -> Self {
        // SAFETY: AES-NI (trait contract).
        Self(unsafe { _mm_aesdec_si128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn dec_last(self, key: Self) -> Self {
        // SAFETY: AES-NI (trait contract).
        Self(unsafe { _mm_aesdeclast_si128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn spread(t: __m128i, first: u32) -> Self {
        // SAFETY: trait contract.
        Self(unsafe { mul_alpha_n(t, first) })
    }
    #[inline(always)]
    unsafe fn advance(self) -> Self {
        // SAFETY: SSE2 and PCLMULQDQ (trait contract). · α^8.
        unsafe {
            let low = _mm_slli_epi64::<8>(self.0);
            let carry = _mm_srli_epi64::<56>(self.0);
            let folded = _mm_clmulepi64_si128::<0x01>(carry, _mm_cvtsi64_si128(POLY));
            Self(_mm_xor_si128(_mm_xor_si128(low, folded), _mm_slli_si128::<8>(carry)))
        }
    }
    #[inline(always)]
    unsafe fn first(self) -> __m128i {
        self.0
    }
}

impl Lanes for Y2 {
    const BLOCKS: usize = 2;
    #[inline(always)]
    unsafe fn load(p: *const u8) -> Self {
        // SAFETY: the caller guarantees 32 readable bytes at `p`.
        Self(unsafe { _mm256_loadu_si256(p.cast()) })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut u8) {
        // SAFETY: the caller guarantees 32 writable bytes at `p`.
        unsafe { _mm256_storeu_si256(p.cast(), self.0) }
    }
    #[inline(always)]
    unsafe fn splat(block: __m128i) -> Self {
        // SAFETY: AVX2 (trait contract).
        Self(unsafe { _mm256_broadcastsi128_si256(block) })
    }
    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        // SAFETY: AVX2 (trait contract).
        Self(unsafe { _mm256_xor_si256(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn xor3(self, a: Self, b: Self) -> Self {
        // SAFETY: AVX2 (trait contract).
        Self(unsafe { _mm256_xor_si256(_mm256_xor_si256(self.0, a.0), b.0) })
    }
    #[inline(always)]
    unsafe fn enc(self, key: Self) -> Self {
        // SAFETY: VAES (trait contract).
        Self(unsafe { _mm256_aesenc_epi128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn enc_last(self, key: Self) -> Self {
        // SAFETY: VAES (trait contract).
        Self(unsafe { _mm256_aesenclast_epi128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn dec(self, key: Self) -> Self {
        // SAFETY: VAES (trait contract).
        Self(unsafe { _mm256_aesdec_epi128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn dec_last(self, key: Self) -> Self {
        // SAFETY: VAES (trait contract).
        Self(unsafe { _mm256_aesdeclast_epi128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn spread(t: __m128i, first: u32) -> Self {
        // SAFETY: AVX2 and VPCLMULQDQ (trait contract). Per-qword shift
        // counts: lane l shifts by first + l; counts of 64 give zero.
        unsafe {
            let f = i64::from(first);
            let n = _mm256_set_epi64x(f + 1, f + 1, f, f);
            let t = _mm256_broadcastsi128_si256(t);
            let low = _mm256_sllv_epi64(t, n);
            let carry =
                _mm256_srlv_epi64(t, _mm256_sub_epi64(_mm256_set_epi64x(64, 64, 64, 64), n));
            let folded =
                _mm256_clmulepi64_epi128::<0x01>(carry, _mm256_set_epi64x(0, POLY, 0, POLY));
            Self(_mm256_xor_si256(_mm256_xor_si256(low, folded), _mm256_bslli_epi128::<8>(carry)))
        }
    }
    #[inline(always)]
    unsafe fn advance(self) -> Self {
        // SAFETY: AVX2 and VPCLMULQDQ (trait contract). · α^16.
        unsafe {
            let low = _mm256_sllv_epi64(self.0, _mm256_set_epi64x(16, 16, 16, 16));
            let carry = _mm256_srlv_epi64(self.0, _mm256_set_epi64x(48, 48, 48, 48));
            let folded =
                _mm256_clmulepi64_epi128::<0x01>(carry, _mm256_set_epi64x(0, POLY, 0, POLY));
            Self(_mm256_xor_si256(_mm256_xor_si256(low, folded), _mm256_bslli_epi128::<8>(carry)))
        }
    }
    #[inline(always)]
    unsafe fn first(self) -> __m128i {
        // SAFETY: AVX (trait contract).
        unsafe { _mm256_castsi256_si128(self.0) }
    }
}

impl Lanes for Z4 {
    const BLOCKS: usize = 4;
    #[inline(always)]
    unsafe fn load(p: *const u8) -> Self {
        // SAFETY: the caller guarantees 64 readable bytes at `p`.
        Self(unsafe { _mm512_loadu_si512(p.cast()) })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut u8) {
        // SAFETY: the caller guarantees 64 writable bytes at `p`.
        unsafe { _mm512_storeu_si512(p.cast(), self.0) }
    }
    #[inline(always)]
    unsafe fn splat(block: __m128i) -> Self {
        // SAFETY: AVX-512F (trait contract).
        Self(unsafe { _mm512_broadcast_i32x4(block) })
    }
    #[inline(always)]
    unsafe fn xor(self, other: Self) -> Self {
        // SAFETY: AVX-512F (trait contract).
        Self(unsafe { _mm512_xor_si512(self.0, other.0) })
    }
    #[inline(always)]
    unsafe fn xor3(self, a: Self, b: Self) -> Self {
        // SAFETY: AVX-512F (trait contract). 0x96 = a ^ b ^ c.
        Self(unsafe { _mm512_ternarylogic_epi64::<0x96>(self.0, a.0, b.0) })
    }
    #[inline(always)]
    unsafe fn enc(self, key: Self) -> Self {
        // SAFETY: VAES + AVX-512F (trait contract).
        Self(unsafe { _mm512_aesenc_epi128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn enc_last(self, key: Self) -> Self {
        // SAFETY: VAES + AVX-512F (trait contract).
        Self(unsafe { _mm512_aesenclast_epi128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn dec(self, key: Self) -> Self {
        // SAFETY: VAES + AVX-512F (trait contract).
        Self(unsafe { _mm512_aesdec_epi128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn dec_last(self, key: Self) -> Self {
        // SAFETY: VAES + AVX-512F (trait contract).
        Self(unsafe { _mm512_aesdeclast_epi128(self.0, key.0) })
    }
    #[inline(always)]
    unsafe fn spread(t: __m128i, first: u32) -> Self {
        // SAFETY: AVX-512F/BW and VPCLMULQDQ (trait contract). Lane l shifts
        // by first + l; counts of 64 give zero.
        unsafe {
            let f = i64::from(first);
            let n = _mm512_set_epi64(f + 3, f + 3, f + 2, f + 2, f + 1, f + 1, f, f);
            let t = _mm512_broadcast_i32x4(t);
            let low = _mm512_sllv_epi64(t, n);
            let carry = _mm512_srlv_epi64(t, _mm512_sub_epi64(_mm512_set1_epi64(64), n));
            let poly = _mm512_set_epi64(0, POLY, 0, POLY, 0, POLY, 0, POLY);
            let folded = _mm512_clmulepi64_epi128::<0x01>(carry, poly);
            Self(_mm512_ternarylogic_epi64::<0x96>(low, folded, _mm512_bslli_epi128::<8>(carry)))
        }
    }
    #[inline(always)]
    unsafe fn advance(self) -> Self {
        // SAFETY: AVX-512F/BW and VPCLMULQDQ (trait contract). · α^32.
        unsafe {
            let low = _mm512_sllv_epi64(self.0, _mm512_set1_epi64(32));
            let carry = _mm512_srlv_epi64(self.0, _mm512_set1_epi64(32));
            let poly = _mm512_set_epi64(0, POLY, 0, POLY, 0, POLY, 0, POLY);
            let folded = _mm512_clmulepi64_epi128::<0x01>(carry, poly);
            Self(_mm512_ternarylogic_epi64::<0x96>(low, folded, _mm512_bslli_epi128::<8>(carry)))
        }
    }
    #[inline(always)]
    unsafe fn first(self) -> __m128i {
        // SAFETY: AVX-512F (trait contract).
        unsafe { _mm512_castsi512_si128(self.0) }
    }
}

// ---------------------------------------------------------------------------
// XTS over any vector width.

/// Vectors in flight per step: enough independent AES chains to cover the
/// latency of VAESENC on current cores, few enough to leave the round keys
/// and tweaks in registers.
const WIDTH: usize = 8;

/// Round keys of one direction, broadcast to every lane, and the tweak
/// key for single blocks. Wiped when dropped.
struct Keys<L: Lanes, const R: usize> {
    data: [L; 15],
    data1: [__m128i; 15],
    tweak: [__m128i; 15],
}

impl<L: Lanes, const R: usize> Keys<L, R> {
    #[inline(always)]
    unsafe fn new(schedule: &Schedule, encrypt: bool) -> Self {
        let source = if encrypt { &schedule.enc } else { &schedule.dec };
        // SAFETY: the caller runs under the features of `L` (which include
        // SSE2); every load reads one 16-byte array element.
        unsafe {
            // Plain loops, not closures: a closure would not inherit the
            // entry point's target features, and the intrinsics inside it
            // would become out-of-line calls.
            let zero = _mm_setzero_si128();
            let mut keys =
                Self { data: [L::splat(zero); 15], data1: [zero; 15], tweak: [zero; 15] };
            for (i, (key, tweak)) in source.iter().zip(&schedule.tweak).enumerate() {
                keys.data1[i] = _mm_loadu_si128((&raw const *key).cast());
                keys.data[i] = L::splat(keys.data1[i]);
                keys.tweak[i] = _mm_loadu_si128((&raw const *tweak).cast());
            }
            keys
        }
    }
}

impl<L: Lanes, const R: usize> Drop for Keys<L, R> {
    fn drop(&mut self) {
        // SAFETY: plain stores of zero bytes over this value's own fields,
        // which are POD vectors; volatile so that they are not elided.
        unsafe {
            std::ptr::write_volatile(&mut self.data, std::mem::zeroed());
            std::ptr::write_volatile(&mut self.data1, std::mem::zeroed());
            std::ptr::write_volatile(&mut self.tweak, std::mem::zeroed());
        }
    }
}

/// AES-encrypts one block with the tweak key.
#[inline(always)]
unsafe fn encrypt_tweak<const R: usize>(keys: &[__m128i; 15], t: __m128i) -> __m128i {
    // SAFETY: AES-NI (caller's features).
    unsafe {
        let mut x = _mm_xor_si128(t, keys[0]);
        for key in &keys[1..R] {
            x = _mm_aesenc_si128(x, *key);
        }
        _mm_aesenclast_si128(x, keys[R])
    }
}

/// Encrypts eight tweaks at once (eight independent AES chains).
#[inline(always)]
unsafe fn encrypt_tweaks<const R: usize>(keys: &[__m128i; 15], t: &mut [__m128i; WIDTH]) {
    // SAFETY: AES-NI (caller's features).
    unsafe {
        for x in t.iter_mut() {
            *x = _mm_xor_si128(*x, keys[0]);
        }
        for key in &keys[1..R] {
            for x in t.iter_mut() {
                *x = _mm_aesenc_si128(*x, *key);
            }
        }
        for x in t.iter_mut() {
            *x = _mm_aesenclast_si128(*x, keys[R]);
        }
    }
}

/// One block of XTS with tweak `t` (the data key of `keys`).
#[inline(always)]
unsafe fn block<L: Lanes, const R: usize, const ENC: bool>(
    keys: &Keys<L, R>,
    x: __m128i,
    t: __m128i,
) -> __m128i {
    // SAFETY: AES-NI and SSE2 (caller's features).
    unsafe {
        let k = &keys.data1;
        let mut x = _mm_xor_si128(_mm_xor_si128(x, t), k[0]);
        for key in &k[1..R] {
            x = if ENC { _mm_aesenc_si128(x, *key) } else { _mm_aesdec_si128(x, *key) };
        }
        let last = _mm_xor_si128(k[R], t);
        if ENC {
            _mm_aesenclast_si128(x, last)
        } else {
            _mm_aesdeclast_si128(x, last)
        }
    }
}

/// XTS of `blocks` whole blocks at `src`→`dst`, the first with tweak `t0`;
/// returns the tweak of the block after them.
///
/// # Safety
/// The features of `L`; `src`/`dst` valid for `blocks * 16` bytes, equal or
/// disjoint.
#[inline(always)]
unsafe fn blocks<L: Lanes, const R: usize, const ENC: bool>(
    keys: &Keys<L, R>,
    src: *const u8,
    dst: *mut u8,
    blocks: usize,
    t0: __m128i,
) -> __m128i {
    let w = L::BLOCKS;
    let k = &keys.data;
    // SAFETY: every load and store below stays within `blocks * 16` bytes
    // of `src`/`dst` (the loop conditions bound `done`); features per the
    // caller. Each vector is loaded before it is stored, so `src == dst`
    // is fine.
    unsafe {
        let mut t = [L::splat(t0); WIDTH];
        for (j, tj) in t.iter_mut().enumerate() {
            *tj = L::spread(t0, (j * w) as u32);
        }
        let mut done = 0;
        while blocks - done >= WIDTH * w {
            let at = done * 16;
            let mut x = t;
            for j in 0..WIDTH {
                x[j] = L::load(src.add(at + j * w * 16)).xor3(t[j], k[0]);
            }
            for key in &k[1..R] {
                for v in &mut x {
                    *v = if ENC { v.enc(*key) } else { v.dec(*key) };
                }
            }
            for j in 0..WIDTH {
                let last = k[R].xor(t[j]);
                let y = if ENC { x[j].enc_last(last) } else { x[j].dec_last(last) };
                y.store(dst.add(at + j * w * 16));
                t[j] = t[j].advance();
            }
            done += WIDTH * w;
        }
        let mut j = 0;
        while blocks - done >= w {
            let at = done * 16;
            let mut v = L::load(src.add(at)).xor3(t[j], k[0]);
            for key in &k[1..R] {
                v = if ENC { v.enc(*key) } else { v.dec(*key) };
            }
            let last = k[R].xor(t[j]);
            let y = if ENC { v.enc_last(last) } else { v.dec_last(last) };
            y.store(dst.add(at));
            done += w;
            j += 1;
        }
        let mut tn = t[j].first();
        while done < blocks {
            let at = done * 16;
            let y = block::<L, R, ENC>(keys, _mm_loadu_si128(src.add(at).cast()), tn);
            _mm_storeu_si128(dst.add(at).cast(), y);
            tn = mul_alpha_n(tn, 1);
            done += 1;
        }
        tn
    }
}

#[inline(always)]
unsafe fn sectors_generic<L: Lanes, const R: usize, const ENC: bool>(
    schedule: &Schedule,
    job: Job,
) {
    // SAFETY: features of `L` from the entry point; the pointers and sizes
    // satisfy `sectors`' contract, so every sector lies within `len`.
    unsafe {
        let keys = Keys::<L, R>::new(schedule, ENC);
        let count = job.len / job.sector;
        let per_sector = job.sector / 16;
        let mut sector = 0;
        let mut number = job.first;
        while sector < count {
            let mut tweaks = [_mm_setzero_si128(); WIDTH];
            for (i, t) in tweaks.iter_mut().enumerate() {
                let n = number.wrapping_add((i as u64).wrapping_mul(job.step));
                *t = _mm_set_epi64x(0, n as i64);
            }
            encrypt_tweaks::<R>(&keys.tweak, &mut tweaks);
            for t in tweaks.iter().take(count - sector) {
                let at = sector * job.sector;
                blocks::<L, R, ENC>(&keys, job.src.add(at), job.dst.add(at), per_sector, *t);
                sector += 1;
            }
            number = number.wrapping_add((WIDTH as u64).wrapping_mul(job.step));
        }
    }
}

#[inline(always)]
unsafe fn unit_generic<L: Lanes, const R: usize, const ENC: bool>(
    schedule: &Schedule,
    job: Job,
    tweak: &[u8; 16],
) {
    // SAFETY: features of `L` from the entry point; `unit`'s contract gives
    // `len` ≥ 16 valid bytes at `src`/`dst`; all offsets below are < len.
    unsafe {
        let keys = Keys::<L, R>::new(schedule, ENC);
        let t0 = encrypt_tweak::<R>(&keys.tweak, _mm_loadu_si128(tweak.as_ptr().cast()));
        let partial = job.len % 16;
        let whole = job.len / 16;
        let bulk = if partial == 0 { whole } else { whole - 1 };
        let tn = blocks::<L, R, ENC>(&keys, job.src, job.dst, bulk, t0);
        if partial == 0 {
            return;
        }
        // Ciphertext stealing: the last whole block goes through with the
        // tweak of the partial one when decrypting, and vice versa.
        let next = mul_alpha_n(tn, 1);
        let (first_t, second_t) = if ENC { (tn, next) } else { (next, tn) };
        let at = bulk * 16;
        let mut tail = [0u8; 16];
        std::ptr::copy_nonoverlapping(job.src.add(at + 16), tail.as_mut_ptr(), partial);
        let mid = block::<L, R, ENC>(&keys, _mm_loadu_si128(job.src.add(at).cast()), first_t);
        let mut mid_bytes = [0u8; 16];
        _mm_storeu_si128(mid_bytes.as_mut_ptr().cast(), mid);
        tail[partial..].copy_from_slice(&mid_bytes[partial..]);
        std::ptr::copy_nonoverlapping(mid_bytes.as_ptr(), job.dst.add(at + 16), partial);
        let last = block::<L, R, ENC>(&keys, _mm_loadu_si128(tail.as_ptr().cast()), second_t);
        _mm_storeu_si128(job.dst.add(at).cast(), last);
        tail.zeroize();
        mid_bytes.zeroize();
    }
}

macro_rules! entry_points {
    ($lanes:ty, $features:literal, $sectors:ident, $unit:ident) => {
        /// # Safety
        /// The CPU has the features enabled here; `job` satisfies
        /// [`sectors`]' contract.
        #[target_feature(enable = $features)]
        unsafe fn $sectors(keys: &Schedule, job: Job, encrypt: bool) {
            // SAFETY: this function's contract.
            unsafe {
                match (keys.rounds, encrypt) {
                    (10, true) => sectors_generic::<$lanes, 10, true>(keys, job),
                    (10, false) => sectors_generic::<$lanes, 10, false>(keys, job),
                    (_, true) => sectors_generic::<$lanes, 14, true>(keys, job),
                    (_, false) => sectors_generic::<$lanes, 14, false>(keys, job),
                }
            }
        }

        /// # Safety
        /// The CPU has the features enabled here; `job` satisfies
        /// [`unit`]'s contract.
        #[target_feature(enable = $features)]
        unsafe fn $unit(keys: &Schedule, job: Job, tweak: &[u8; 16], encrypt: bool) {
            // SAFETY: this function's contract.
            unsafe {
                match (keys.rounds, encrypt) {
                    (10, true) => unit_generic::<$lanes, 10, true>(keys, job, tweak),
                    (10, false) => unit_generic::<$lanes, 10, false>(keys, job, tweak),
                    (_, true) => unit_generic::<$lanes, 14, true>(keys, job, tweak),
                    (_, false) => unit_generic::<$lanes, 14, false>(keys, job, tweak),
                }
            }
        }
    };
}

entry_points!(
    Z4,
    "aes,pclmulqdq,sse2,avx2,avx512f,avx512bw,vaes,vpclmulqdq",
    sectors_vaes512,
    unit_vaes512
);
entry_points!(Y2, "aes,pclmulqdq,sse2,avx2,vaes,vpclmulqdq", sectors_vaes256, unit_vaes256);
entry_points!(X1, "aes,pclmulqdq,sse2", sectors_aesni, unit_aesni);

// ---------------------------------------------------------------------------
// The instruction ceiling, for `rampart bench`.

/// Bytes per second that VAESENC on 512-bit registers can push through
/// AES with `rounds` rounds on one core, with no memory traffic at all:
/// [`CEILING_CHAINS`] independent blocks-of-four cycle through the rounds
/// for about `seconds`. `None` without VAES/AVX-512.
pub(crate) fn register_ceiling(rounds: usize, seconds: f64) -> Option<crate::CeilingRate> {
    if !Path::Vaes512.available() {
        return None;
    }
    let start = std::time::Instant::now();
    let cpu_start = crate::thread_cpu_time();
    let mut bytes = 0u64;
    let mut sink = 0u64;
    while start.elapsed().as_secs_f64() < seconds {
        // SAFETY: VAES/AVX-512 were detected just above.
        sink ^= unsafe { ceiling_loop(rounds, 100_000) };
        bytes += 100_000 * CEILING_CHAINS as u64 * 64;
    }
    std::hint::black_box(sink);
    let cpu = match (cpu_start, crate::thread_cpu_time()) {
        (Some(from), Some(to)) => Some(bytes as f64 / (to - from).as_secs_f64().max(1e-9)),
        _ => None,
    };
    Some(crate::CeilingRate { wall: bytes as f64 / start.elapsed().as_secs_f64(), cpu })
}

/// Independent VAESENC chains of the ceiling loop. Zen 5 (this project's
/// build machine) retires one 512-bit VAESENC per cycle with a latency of
/// four, so four chains already saturate it; 4, 8, 12, 16 and 24 chains
/// measured the same (within 1%), and 256-bit VAESENC (two per cycle) the
/// same bytes per cycle. Twelve covers cores with longer latency or more
/// AES units while staying within the 32 vector registers (no spills).
const CEILING_CHAINS: usize = 12;

/// `iterations` × ([`CEILING_CHAINS`] vectors × `rounds` VAESENC).
///
/// # Safety
/// The CPU has AVX-512F and VAES.
#[target_feature(enable = "avx512f,vaes")]
unsafe fn ceiling_loop(rounds: usize, iterations: u64) -> u64 {
    let key = std::hint::black_box(_mm512_set1_epi64(0x0123_4567_89ab_cdef));
    let mut x = [key; CEILING_CHAINS];
    for (i, v) in x.iter_mut().enumerate() {
        *v = _mm512_set1_epi64(i as i64);
    }
    for _ in 0..iterations {
        for _ in 0..rounds {
            for v in &mut x {
                *v = _mm512_aesenc_epi128(*v, key);
            }
        }
    }
    let mut out = 0u64;
    for v in x {
        out ^= _mm_cvtsi128_si64x(_mm512_castsi512_si128(v)) as u64;
    }
    out
}
