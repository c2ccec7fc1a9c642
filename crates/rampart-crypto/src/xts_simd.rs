//! AES-XTS on the CPU's AES instructions: VAES on 512-bit (AVX-512) or
//! 256-bit (AVX2) vectors, or AES-NI on 128-bit ones.
//!
//! One call transforms any number of consecutive sectors. Within a sector,
//! eight vectors of blocks go through the AES rounds together, so the AES
//! units always have independent work; the tweaks of those blocks are kept
//! in registers and advanced by multiplication by a power of α in GF(2^128)
//! with immediate shifts and one carry-less multiply by the reduction
//! constant 0x87 per vector: a sector's first vector of tweaks comes from
//! its encrypted tweak, each next vector from the one before (· α^BLOCKS),
//! each next group of eight from the group before (· α^(8·BLOCKS)). The
//! encrypted tweaks of up to 32 sectors come from up to eight vector AES
//! chains (one vector chain when the call has a single sector, which also
//! encrypts the tweak of the sector after it for the next call:
//! [`NextTweak`]). Round keys
//! are kept in the [`Schedule`] already repeated to 512 bits, so a call
//! neither broadcasts nor copies them. On 512-bit vectors the loop over
//! whole groups is assembly ([`groups_vaes512`]) that holds the round keys
//! in registers: read from memory by every AES instruction, they made a
//! core that loads two 512-bit vectors per cycle wait on its loads.
//!
//! Measured on Zen 5 (BENCHMARKS.md, "AES-XTS engine"): the AES
//! instructions share the vector pipes with the shifts, shuffles and
//! carry-less multiplies of the tweak arithmetic, which takes a share of
//! the AES throughput; replacing the multiply by shifts, or the
//! 64-bit shifts by byte shifts, or doubling tweaks in general-purpose
//! registers (which the compiler vectorizes back), all measured slower.
//! Intel's cores put 512-bit AES and 512-bit bit shifts on one port, so
//! the step between groups (· α^32, four whole bytes) is done by byte
//! shifts and the multiply alone ([`Path::Vaes512ByteShift`], faster there
//! and on a Zen 5 that issues two 512-bit AES instructions per cycle): the
//! default; bit shifts stay a forced path.
//!
//! Constant time: no branch and no memory address depends on a key, an
//! encrypted tweak or the data; only on lengths, the sector count and
//! whether a sector's number is the one the previous call predicted
//! ([`NextTweak`]): sector numbers are where the I/O goes, which anyone
//! who sees the I/O sees anyway.
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
    _mm256_set1_epi64x, _mm256_set_epi64x, _mm256_slli_epi64, _mm256_sllv_epi64, _mm256_srli_epi64,
    _mm256_srlv_epi64, _mm256_storeu_si256, _mm256_sub_epi64, _mm256_xor_si256,
    _mm512_aesdec_epi128, _mm512_aesdeclast_epi128, _mm512_aesenc_epi128, _mm512_aesenclast_epi128,
    _mm512_broadcast_i32x4, _mm512_bslli_epi128, _mm512_bsrli_epi128, _mm512_castsi512_si128,
    _mm512_clmulepi64_epi128, _mm512_loadu_si512, _mm512_set1_epi64, _mm512_set_epi64,
    _mm512_slli_epi64, _mm512_sllv_epi64, _mm512_srli_epi64, _mm512_srlv_epi64,
    _mm512_storeu_si512, _mm512_sub_epi64, _mm512_ternarylogic_epi64, _mm512_xor_si512,
    _mm_aesdec_si128, _mm_aesdeclast_si128, _mm_aesenc_si128, _mm_aesenclast_si128,
    _mm_aesimc_si128, _mm_aeskeygenassist_si128, _mm_clmulepi64_si128, _mm_cvtsi128_si64x,
    _mm_cvtsi32_si128, _mm_cvtsi64_si128, _mm_loadu_si128, _mm_prefetch, _mm_set1_epi64x,
    _mm_set_epi64x, _mm_shuffle_epi32, _mm_sll_epi64, _mm_slli_epi64, _mm_slli_si128,
    _mm_srl_epi64, _mm_srli_epi64, _mm_storeu_si128, _mm_xor_si128, _MM_HINT_T0,
};

use std::cell::Cell;

use zeroize::Zeroize;

/// The instruction sets the engine can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// 512-bit vectors; tweaks advanced by 64-bit bit shifts.
    Vaes512,
    /// 512-bit vectors; tweaks advanced by byte shifts of whole lanes. Intel's
    /// cores issue 512-bit VAESENC and 512-bit bit shifts on the same port
    /// (0), byte shifts and carry-less multiplies on another (5); there the
    /// byte shifts leave the AES port to the AES rounds. On the first Zen 5
    /// measured (half-rate 512-bit AES) the bit shifts were the faster, on
    /// a later one these (BENCHMARKS.md, "AES-XTS engine").
    Vaes512ByteShift,
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
            Self::Vaes512 | Self::Vaes512ByteShift => {
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
    /// The same round keys, each repeated four times: a vector of any
    /// width loads its round key straight from here, so a call neither
    /// broadcasts the keys nor wipes copies of them.
    wide_enc: [Wide; 15],
    wide_dec: [Wide; 15],
    wide_tweak: [Wide; 15],
    /// The encrypted tweak of the sector that follows the last one-sector
    /// call ([`NextTweak`]).
    next: Cell<NextTweak>,
}

/// A one-sector call cannot start on its blocks before its tweak has gone
/// through the 10 or 14 dependent rounds of the tweak key, a latency a
/// 4 KiB sector's blocks then wait for (BENCHMARKS.md, "AES-XTS engine").
/// Each one-sector call therefore encrypts, in the same
/// AES chain as its own tweak (another lane of the vector), the tweak of
/// the sector after it, and keeps it here: a stream of one-sector calls
/// in order (sequential 4 KiB I/O) finds its tweak ready. The value is a
/// pure function of the key and `number`, so it is never stale; a call
/// for any other sector simply computes its own.
#[derive(Clone, Copy, Default)]
struct NextTweak {
    number: u64,
    encrypted: u128,
    valid: bool,
}

/// One round key in each of the four 128-bit lanes of a 512-bit vector.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Wide([u128; 4]);

impl Drop for Schedule {
    fn drop(&mut self) {
        self.next.get_mut().encrypted.zeroize();
        self.enc.zeroize();
        self.dec.zeroize();
        self.tweak.zeroize();
        for wide in [&mut self.wide_enc, &mut self.wide_dec, &mut self.wide_tweak] {
            for key in wide.iter_mut() {
                key.0.zeroize();
            }
        }
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
        let mut schedule = Box::new(Self {
            path,
            rounds: 0,
            enc: [0; 15],
            dec: [0; 15],
            tweak: [0; 15],
            wide_enc: [Wide::default(); 15],
            wide_dec: [Wide::default(); 15],
            wide_tweak: [Wide::default(); 15],
            next: Cell::new(NextTweak::default()),
        });
        // SAFETY: AES-NI and SSE2 were detected just above; `expand` reads
        // exactly `half` (16 or 32) bytes from each slice it is given.
        unsafe {
            schedule.rounds = expand(&key[..half], &mut schedule.enc);
            expand(&key[half..], &mut schedule.tweak);
            invert(&schedule.enc, &mut schedule.dec, schedule.rounds);
        }
        for i in 0..15 {
            schedule.wide_enc[i] = Wide([schedule.enc[i]; 4]);
            schedule.wide_dec[i] = Wide([schedule.dec[i]; 4]);
            schedule.wide_tweak[i] = Wide([schedule.tweak[i]; 4]);
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
            Path::Vaes512ByteShift => sectors_vaes512_byte_shift(keys, job, encrypt),
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
            Path::Vaes512ByteShift => unit_vaes512_byte_shift(keys, job, tweak, encrypt),
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
    /// A round key, read from memory at its every use: the compiler would
    /// otherwise hoist all fifteen into registers, spill the data vectors
    /// and tweaks instead, and copy the keys onto the stack.
    unsafe fn load_key(key: &Wide) -> Self;
    unsafe fn xor(self, other: Self) -> Self;
    /// self ^ a ^ b.
    unsafe fn xor3(self, a: Self, b: Self) -> Self;
    unsafe fn enc(self, key: Self) -> Self;
    unsafe fn enc_last(self, key: Self) -> Self;
    unsafe fn dec(self, key: Self) -> Self;
    unsafe fn dec_last(self, key: Self) -> Self;
    /// Every lane · α^`BLOCKS`: the tweaks of the next vector.
    unsafe fn step(self) -> Self;
    /// The tweaks of a sector's first [`WIDTH`] vectors from the first
    /// block's, `t0`: lane `l` of vector `j` is `t0` · α^(`j`·`BLOCKS` + `l`).
    /// Each from `t0` directly (variable shifts), not each from the one
    /// before: a chain of eight dependent multiplications held up the
    /// start of every sector (BENCHMARKS.md, "AES-XTS engine").
    unsafe fn group(t0: __m128i) -> [Self; WIDTH];
    /// Every lane · α^(8 · `BLOCKS`): the tweaks eight vectors on.
    unsafe fn advance(self) -> Self;
    /// Block 0 of the vector.
    unsafe fn first(self) -> __m128i;
    /// Lane `l` = the plain64 block of `first + l * step` (wrapping).
    unsafe fn numbers(first: u64, step: u64) -> Self;

    /// XTS of `groups` (≥ 1) groups of [`WIDTH`] vectors from `src` to
    /// `dst`, group by group, the first with the tweaks `t`; `t` is
    /// advanced past each group but the last, and past the last too when
    /// `advance_last`. Sources below `prefetch_end` are asked into the
    /// cache [`PREFETCH_AHEAD`] bytes before they are read.
    ///
    /// # Safety
    /// The features of the implementation; `src`/`dst` valid for
    /// `groups * WIDTH * BLOCKS * 16` bytes, equal or disjoint.
    #[inline(always)]
    unsafe fn groups<const R: usize, const ENC: bool>(
        keys: &Keys<'_, Self, R>,
        src: *const u8,
        dst: *mut u8,
        groups: usize,
        prefetch_end: *const u8,
        t: &mut [Self; WIDTH],
        advance_last: bool,
    ) {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            groups_intrinsics::<Self, R, ENC>(keys, src, dst, groups, prefetch_end, t, advance_last)
        }
    }
}

/// Lane `l` of [`Lanes::numbers`].
#[inline(always)]
fn number(first: u64, step: u64, l: u64) -> i64 {
    first.wrapping_add(step.wrapping_mul(l)) as i64
}

/// The low 64 bits of the XTS reduction polynomial x^128 + x^7 + x^2 + x + 1.
const POLY: i64 = 0x87;

#[derive(Clone, Copy)]
struct X1(__m128i);
#[derive(Clone, Copy)]
struct Y2(__m256i);
/// Four blocks; `BYTE_SHIFT` picks the tweak advance (see [`Path`]).
#[derive(Clone, Copy)]
struct Z4<const BYTE_SHIFT: bool>(__m512i);

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
    unsafe fn load_key(key: &Wide) -> Self {
        // SAFETY: `Wide` is 64 aligned bytes, at least a whole vector.
        Self(unsafe { std::ptr::read_volatile((&raw const *key).cast::<__m128i>()) })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut u8) {
        // SAFETY: the caller guarantees 16 writable bytes at `p`.
        unsafe { _mm_storeu_si128(p.cast(), self.0) }
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
    unsafe fn group(t0: __m128i) -> [Self; WIDTH] {
        // SAFETY: SSE2 and PCLMULQDQ (trait contract).
        unsafe {
            let mut out = [Self(t0); WIDTH];
            for (j, v) in out.iter_mut().enumerate().skip(1) {
                *v = Self(mul_alpha_n(t0, j as u32));
            }
            out
        }
    }
    #[inline(always)]
    unsafe fn step(self) -> Self {
        // SAFETY: SSE2 and PCLMULQDQ (trait contract).
        Self(unsafe { x_mul::<1, 63>(self.0) })
    }
    #[inline(always)]
    unsafe fn advance(self) -> Self {
        // SAFETY: SSE2 and PCLMULQDQ (trait contract).
        Self(unsafe { x_mul::<8, 56>(self.0) })
    }
    #[inline(always)]
    unsafe fn first(self) -> __m128i {
        self.0
    }
    #[inline(always)]
    unsafe fn numbers(first: u64, _step: u64) -> Self {
        // SAFETY: SSE2 (trait contract).
        Self(unsafe { _mm_set_epi64x(0, first as i64) })
    }
}

/// `t` · α^`S` in each 128-bit lane, for 0 < `S` < 64 and `C` = 64 − `S`:
/// the bits shifted out of each lane's top qword fold back in times 0x87,
/// those out of its low qword move into the high one.
#[inline(always)]
unsafe fn x_mul<const S: i32, const C: i32>(t: __m128i) -> __m128i {
    // SAFETY: SSE2 and PCLMULQDQ (caller's features).
    unsafe {
        let low = _mm_slli_epi64::<S>(t);
        let carry = _mm_srli_epi64::<C>(t);
        let folded = _mm_clmulepi64_si128::<0x01>(carry, _mm_cvtsi64_si128(POLY));
        _mm_xor_si128(_mm_xor_si128(low, folded), _mm_slli_si128::<8>(carry))
    }
}

/// As [`x_mul`] on two lanes.
#[inline(always)]
unsafe fn y_mul<const S: i32, const C: i32>(t: __m256i) -> __m256i {
    // SAFETY: AVX2 and VPCLMULQDQ (caller's features).
    unsafe {
        let low = _mm256_slli_epi64::<S>(t);
        let carry = _mm256_srli_epi64::<C>(t);
        let folded = _mm256_clmulepi64_epi128::<0x01>(carry, _mm256_set_epi64x(0, POLY, 0, POLY));
        _mm256_xor_si256(_mm256_xor_si256(low, folded), _mm256_bslli_epi128::<8>(carry))
    }
}

/// As [`x_mul`] on four lanes.
#[inline(always)]
unsafe fn z_mul<const S: u32, const C: u32>(t: __m512i) -> __m512i {
    // SAFETY: AVX-512F/BW and VPCLMULQDQ (caller's features).
    unsafe {
        let low = _mm512_slli_epi64::<S>(t);
        let carry = _mm512_srli_epi64::<C>(t);
        let poly = _mm512_set_epi64(0, POLY, 0, POLY, 0, POLY, 0, POLY);
        let folded = _mm512_clmulepi64_epi128::<0x01>(carry, poly);
        _mm512_ternarylogic_epi64::<0x96>(low, folded, _mm512_bslli_epi128::<8>(carry))
    }
}

/// As [`z_mul`] for a whole number of bytes, 0 < `B` < 8 and `C` = 16 −
/// `B`: each lane shifted left by `B` bytes, its top `B` bytes folded back
/// in times 0x87 by one carry-less multiply (no bit shift at all).
#[inline(always)]
unsafe fn z_mul_bytes<const B: i32, const C: i32>(t: __m512i) -> __m512i {
    // SAFETY: AVX-512F/BW and VPCLMULQDQ (caller's features).
    unsafe {
        let poly = _mm512_set_epi64(0, POLY, 0, POLY, 0, POLY, 0, POLY);
        let low = _mm512_bslli_epi128::<B>(t);
        let top = _mm512_bsrli_epi128::<C>(t);
        _mm512_xor_si512(low, _mm512_clmulepi64_epi128::<0x00>(top, poly))
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
    unsafe fn load_key(key: &Wide) -> Self {
        // SAFETY: `Wide` is 64 aligned bytes, at least a whole vector.
        Self(unsafe { std::ptr::read_volatile((&raw const *key).cast::<__m256i>()) })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut u8) {
        // SAFETY: the caller guarantees 32 writable bytes at `p`.
        unsafe { _mm256_storeu_si256(p.cast(), self.0) }
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
    unsafe fn group(t0: __m128i) -> [Self; WIDTH] {
        // SAFETY: AVX2 and VPCLMULQDQ (trait contract). Per-qword shift
        // counts; a count of 64 gives zero.
        unsafe {
            let t = _mm256_broadcastsi128_si256(t0);
            let poly = _mm256_set_epi64x(0, POLY, 0, POLY);
            let mut out = [Self(t); WIDTH];
            for (j, v) in out.iter_mut().enumerate() {
                let f = 2 * j as i64;
                let n = _mm256_set_epi64x(f + 1, f + 1, f, f);
                let low = _mm256_sllv_epi64(t, n);
                let carry = _mm256_srlv_epi64(t, _mm256_sub_epi64(_mm256_set1_epi64x(64), n));
                let folded = _mm256_clmulepi64_epi128::<0x01>(carry, poly);
                *v = Self(_mm256_xor_si256(
                    _mm256_xor_si256(low, folded),
                    _mm256_bslli_epi128::<8>(carry),
                ));
            }
            out
        }
    }
    #[inline(always)]
    unsafe fn step(self) -> Self {
        // SAFETY: AVX2 and VPCLMULQDQ (trait contract).
        Self(unsafe { y_mul::<2, 62>(self.0) })
    }
    #[inline(always)]
    unsafe fn advance(self) -> Self {
        // SAFETY: AVX2 and VPCLMULQDQ (trait contract).
        Self(unsafe { y_mul::<16, 48>(self.0) })
    }
    #[inline(always)]
    unsafe fn first(self) -> __m128i {
        // SAFETY: AVX (trait contract).
        unsafe { _mm256_castsi256_si128(self.0) }
    }
    #[inline(always)]
    unsafe fn numbers(first: u64, step: u64) -> Self {
        // SAFETY: AVX (trait contract).
        Self(unsafe { _mm256_set_epi64x(0, number(first, step, 1), 0, number(first, step, 0)) })
    }
}

impl<const BYTE_SHIFT: bool> Lanes for Z4<BYTE_SHIFT> {
    const BLOCKS: usize = 4;
    #[inline(always)]
    unsafe fn load(p: *const u8) -> Self {
        // SAFETY: the caller guarantees 64 readable bytes at `p`.
        Self(unsafe { _mm512_loadu_si512(p.cast()) })
    }
    #[inline(always)]
    unsafe fn load_key(key: &Wide) -> Self {
        // SAFETY: `Wide` is 64 aligned bytes, at least a whole vector.
        Self(unsafe { std::ptr::read_volatile((&raw const *key).cast::<__m512i>()) })
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut u8) {
        // SAFETY: the caller guarantees 64 writable bytes at `p`.
        unsafe { _mm512_storeu_si512(p.cast(), self.0) }
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
    unsafe fn group(t0: __m128i) -> [Self; WIDTH] {
        // SAFETY: AVX-512F/BW and VPCLMULQDQ (trait contract). Per-qword
        // shift counts; a count of 64 gives zero.
        unsafe {
            let t = _mm512_broadcast_i32x4(t0);
            let poly = _mm512_set_epi64(0, POLY, 0, POLY, 0, POLY, 0, POLY);
            let mut out = [Self(t); WIDTH];
            for (j, v) in out.iter_mut().enumerate() {
                let f = 4 * j as i64;
                let n = _mm512_set_epi64(f + 3, f + 3, f + 2, f + 2, f + 1, f + 1, f, f);
                let low = _mm512_sllv_epi64(t, n);
                let carry = _mm512_srlv_epi64(t, _mm512_sub_epi64(_mm512_set1_epi64(64), n));
                let folded = _mm512_clmulepi64_epi128::<0x01>(carry, poly);
                *v = Self(_mm512_ternarylogic_epi64::<0x96>(
                    low,
                    folded,
                    _mm512_bslli_epi128::<8>(carry),
                ));
            }
            out
        }
    }
    #[inline(always)]
    unsafe fn step(self) -> Self {
        // SAFETY: AVX-512F/BW and VPCLMULQDQ (trait contract).
        Self(unsafe { z_mul::<4, 60>(self.0) })
    }
    #[inline(always)]
    unsafe fn advance(self) -> Self {
        // SAFETY: AVX-512F/BW and VPCLMULQDQ (trait contract).
        Self(unsafe {
            if BYTE_SHIFT {
                z_mul_bytes::<4, 12>(self.0)
            } else {
                z_mul::<32, 32>(self.0)
            }
        })
    }
    #[inline(always)]
    unsafe fn first(self) -> __m128i {
        // SAFETY: AVX-512F (trait contract).
        unsafe { _mm512_castsi512_si128(self.0) }
    }
    #[inline(always)]
    unsafe fn numbers(first: u64, step: u64) -> Self {
        // SAFETY: AVX-512F (trait contract).
        Self(unsafe {
            _mm512_set_epi64(
                0,
                number(first, step, 3),
                0,
                number(first, step, 2),
                0,
                number(first, step, 1),
                0,
                number(first, step, 0),
            )
        })
    }
    #[inline(always)]
    unsafe fn groups<const R: usize, const ENC: bool>(
        keys: &Keys<'_, Self, R>,
        src: *const u8,
        dst: *mut u8,
        groups: usize,
        prefetch_end: *const u8,
        t: &mut [Self; WIDTH],
        advance_last: bool,
    ) {
        // SAFETY: forwarded from this function's contract; `keys.data`
        // holds the 15 round keys, 64-byte aligned.
        unsafe {
            groups_vaes512::<R, ENC, BYTE_SHIFT>(
                keys.data.as_ptr(),
                src,
                dst,
                groups,
                prefetch_end,
                t,
                advance_last,
            )
        }
    }
}

// ---------------------------------------------------------------------------
// The 512-bit group loop in assembly.

/// One AES round (`$op`: vaesenc, vaesdec) with the key in `zmm$k` on the
/// eight data vectors `zmm0`–`zmm7`.
#[rustfmt::skip]
macro_rules! round_on_data {
    ($op:literal, $k:literal) => {
        concat!(
            $op, " zmm0, zmm0, zmm", $k, "\n",
            $op, " zmm1, zmm1, zmm", $k, "\n",
            $op, " zmm2, zmm2, zmm", $k, "\n",
            $op, " zmm3, zmm3, zmm", $k, "\n",
            $op, " zmm4, zmm4, zmm", $k, "\n",
            $op, " zmm5, zmm5, zmm", $k, "\n",
            $op, " zmm6, zmm6, zmm", $k, "\n",
            $op, " zmm7, zmm7, zmm", $k, "\n",
        )
    };
}

/// The tweak vector `zmm$t` times α^32 in each lane (as [`z_mul`] or, with
/// `bytes`, [`z_mul_bytes`]), the reduction constant in `zmm29`, scratch in
/// `zmm30` and `zmm31`.
#[rustfmt::skip]
macro_rules! advance_tweak {
    (bits, $t:literal) => {
        concat!(
            "vpsrlq zmm30, zmm", $t, ", 32\n",
            "vpclmulqdq zmm31, zmm30, zmm29, 0x01\n",
            "vpslldq zmm30, zmm30, 8\n",
            "vpsllq zmm", $t, ", zmm", $t, ", 32\n",
            "vpternlogq zmm", $t, ", zmm31, zmm30, 0x96\n",
        )
    };
    (bytes, $t:literal) => {
        concat!(
            "vpsrldq zmm30, zmm", $t, ", 12\n",
            "vpslldq zmm", $t, ", zmm", $t, ", 4\n",
            "vpclmulqdq zmm30, zmm30, zmm29, 0x00\n",
            "vpxorq zmm", $t, ", zmm", $t, ", zmm30\n",
        )
    };
}

/// All eight tweak vectors `zmm8`–`zmm15` advanced.
macro_rules! advance_tweaks {
    ($shift:ident) => {
        concat!(
            advance_tweak!($shift, "8"),
            advance_tweak!($shift, "9"),
            advance_tweak!($shift, "10"),
            advance_tweak!($shift, "11"),
            advance_tweak!($shift, "12"),
            advance_tweak!($shift, "13"),
            advance_tweak!($shift, "14"),
            advance_tweak!($shift, "15"),
        )
    };
}

/// Data vector `$i` (`zmm$i`, tweak `zmm$t`) loaded and whitened with the
/// first round key.
#[rustfmt::skip]
macro_rules! whiten {
    ($i:literal, $t:literal) => {
        concat!(
            "vmovdqu64 zmm", $i, ", zmmword ptr [{src} + 64*", $i, "]\n",
            "vpternlogq zmm", $i, ", zmm", $t, ", zmmword ptr [{keys}], 0x96\n",
        )
    };
}

/// Data vector `$i`'s last round (key `R` xor its tweak `zmm$t`, through
/// scratch `zmm$s`) and its store.
#[rustfmt::skip]
macro_rules! finish {
    ($last:literal, $i:literal, $t:literal, $s:literal) => {
        concat!(
            "vpxorq zmm", $s, ", zmm", $t, ", zmmword ptr [{keys} + {last}]\n",
            $last, " zmm", $i, ", zmm", $i, ", zmm", $s, "\n",
            "vmovdqu64 zmmword ptr [{dst} + 64*", $i, "], zmm", $i, "\n",
        )
    };
}

/// The group loop: round keys 1 to R−1 in `zmm16`… (`$k`: their register
/// numbers, key `n` in register `15 + n`), data in `zmm0`–`zmm7`, tweaks
/// in `zmm8`–`zmm15`; keys 0 and R read from memory by the two
/// instructions per vector that use them. The key registers and the
/// scratch ones are cleared on the way out.
macro_rules! group_loop {
    ($op:literal, $last:literal, $shift:ident, [$($k:literal)*],
     $keys:expr, $src:expr, $dst:expr, $groups:expr, $prefetch_end:expr, $advance_last:expr,
     $t:expr, $poly:expr, $last_offset:expr) => {
        core::arch::asm!(
            $(concat!("vmovdqa64 zmm", $k, ", zmmword ptr [{keys} + 64*", $k, " - 64*15]"),)*
            "2:",
            "cmp {src}, {prefetch_end}",
            "jae 3f",
            "prefetcht0 byte ptr [{src} + 4096]",
            "prefetcht0 byte ptr [{src} + 4096 + 64]",
            "prefetcht0 byte ptr [{src} + 4096 + 128]",
            "prefetcht0 byte ptr [{src} + 4096 + 192]",
            "prefetcht0 byte ptr [{src} + 4096 + 256]",
            "prefetcht0 byte ptr [{src} + 4096 + 320]",
            "prefetcht0 byte ptr [{src} + 4096 + 384]",
            "prefetcht0 byte ptr [{src} + 4096 + 448]",
            "3:",
            whiten!("0", "8"),
            whiten!("1", "9"),
            whiten!("2", "10"),
            whiten!("3", "11"),
            whiten!("4", "12"),
            whiten!("5", "13"),
            whiten!("6", "14"),
            whiten!("7", "15"),
            $(round_on_data!($op, $k),)*
            finish!($last, "0", "8", "30"),
            finish!($last, "1", "9", "31"),
            finish!($last, "2", "10", "30"),
            finish!($last, "3", "11", "31"),
            finish!($last, "4", "12", "30"),
            finish!($last, "5", "13", "31"),
            finish!($last, "6", "14", "30"),
            finish!($last, "7", "15", "31"),
            "add {src}, 512",
            "add {dst}, 512",
            "dec {groups}",
            "jz 4f",
            advance_tweaks!($shift),
            "jmp 2b",
            "4:",
            "test {advance_last}, {advance_last}",
            "jz 5f",
            advance_tweaks!($shift),
            "5:",
            $(concat!("vpxord zmm", $k, ", zmm", $k, ", zmm", $k),)*
            "vpxord zmm30, zmm30, zmm30",
            "vpxord zmm31, zmm31, zmm31",
            keys = in(reg) $keys,
            last = const $last_offset,
            src = inout(reg) $src => _,
            dst = inout(reg) $dst => _,
            groups = inout(reg) $groups => _,
            prefetch_end = in(reg) $prefetch_end,
            advance_last = in(reg) usize::from($advance_last),
            inout("zmm8") $t[0].0,
            inout("zmm9") $t[1].0,
            inout("zmm10") $t[2].0,
            inout("zmm11") $t[3].0,
            inout("zmm12") $t[4].0,
            inout("zmm13") $t[5].0,
            inout("zmm14") $t[6].0,
            inout("zmm15") $t[7].0,
            in("zmm29") $poly,
            out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _,
            out("zmm4") _, out("zmm5") _, out("zmm6") _, out("zmm7") _,
            out("zmm16") _, out("zmm17") _, out("zmm18") _, out("zmm19") _,
            out("zmm20") _, out("zmm21") _, out("zmm22") _, out("zmm23") _,
            out("zmm24") _, out("zmm25") _, out("zmm26") _, out("zmm27") _,
            out("zmm28") _, out("zmm30") _, out("zmm31") _,
            options(nostack),
        )
    };
}

/// [`Lanes::groups`] on 512-bit vectors, in assembly so that the round
/// keys stay in registers: with each AES instruction reading its key from
/// memory, a group needs 128 vector loads beside its 112 AES instructions,
/// and a core that loads two 512-bit vectors per cycle (Zen 5's) then
/// waits on its loads, not on its AES units (BENCHMARKS.md, "AES-XTS
/// engine"). Compiled intrinsics cannot be made to keep fifteen keys in
/// registers without spilling them (and so copying them onto the stack).
///
/// # Safety
/// As [`Lanes::groups`], with `keys` pointing at the direction's 15 round
/// keys; VAES, AVX-512F/BW and VPCLMULQDQ are present.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,vaes,vpclmulqdq")]
#[allow(clippy::too_many_arguments)]
unsafe fn groups_vaes512<const R: usize, const ENC: bool, const BYTE_SHIFT: bool>(
    keys: *const Wide,
    src: *const u8,
    dst: *mut u8,
    groups: usize,
    prefetch_end: *const u8,
    t: &mut [Z4<BYTE_SHIFT>; WIDTH],
    advance_last: bool,
) {
    // The loop counts down to zero after its first group: zero groups
    // would run it 2^64 times.
    assert!(groups > 0);
    // SAFETY: the caller's contract: `groups` ≥ 1 groups of 512 bytes at
    // `src` and `dst`; every instruction of the loop is VAES, AVX-512F/BW,
    // VPCLMULQDQ or plain x86-64; the stack is not touched.
    unsafe {
        let poly = _mm512_set_epi64(0, POLY, 0, POLY, 0, POLY, 0, POLY);
        match (R, ENC, BYTE_SHIFT) {
            (14, true, false) => group_loop!("vaesenc", "vaesenclast", bits,
                ["16" "17" "18" "19" "20" "21" "22" "23" "24" "25" "26" "27" "28"],
                keys, src, dst, groups, prefetch_end, advance_last, t, poly, 64 * 14),
            (14, false, false) => group_loop!("vaesdec", "vaesdeclast", bits,
                ["16" "17" "18" "19" "20" "21" "22" "23" "24" "25" "26" "27" "28"],
                keys, src, dst, groups, prefetch_end, advance_last, t, poly, 64 * 14),
            (14, true, true) => group_loop!("vaesenc", "vaesenclast", bytes,
                ["16" "17" "18" "19" "20" "21" "22" "23" "24" "25" "26" "27" "28"],
                keys, src, dst, groups, prefetch_end, advance_last, t, poly, 64 * 14),
            (14, false, true) => group_loop!("vaesdec", "vaesdeclast", bytes,
                ["16" "17" "18" "19" "20" "21" "22" "23" "24" "25" "26" "27" "28"],
                keys, src, dst, groups, prefetch_end, advance_last, t, poly, 64 * 14),
            (10, true, false) => group_loop!("vaesenc", "vaesenclast", bits,
                ["16" "17" "18" "19" "20" "21" "22" "23" "24"],
                keys, src, dst, groups, prefetch_end, advance_last, t, poly, 64 * 10),
            (10, false, false) => group_loop!("vaesdec", "vaesdeclast", bits,
                ["16" "17" "18" "19" "20" "21" "22" "23" "24"],
                keys, src, dst, groups, prefetch_end, advance_last, t, poly, 64 * 10),
            (10, true, true) => group_loop!("vaesenc", "vaesenclast", bytes,
                ["16" "17" "18" "19" "20" "21" "22" "23" "24"],
                keys, src, dst, groups, prefetch_end, advance_last, t, poly, 64 * 10),
            (10, false, true) => group_loop!("vaesdec", "vaesdeclast", bytes,
                ["16" "17" "18" "19" "20" "21" "22" "23" "24"],
                keys, src, dst, groups, prefetch_end, advance_last, t, poly, 64 * 10),
            _ => unreachable!("AES has 10 or 14 rounds here"),
        }
    }
}

// ---------------------------------------------------------------------------
// XTS over any vector width.

/// Vectors in flight per step: enough independent AES chains to cover the
/// latency of VAESENC (four cycles, at one 512-bit instruction per cycle on
/// the first Zen 5 measured and two on a later one: eight chains saturate
/// both), few enough to keep the data and tweaks of a group in registers,
/// with the round keys beside them on 512-bit vectors ([`groups_vaes512`])
/// and read from memory by each instruction on narrower ones. Sixteen
/// chains, with the tweaks in memory, were slower on the later Zen 5:
/// each group then waited for the tweaks the last one stored.
const WIDTH: usize = 8;

/// How far ahead of the group being transformed its source is asked into
/// the cache. A volume's data read straight from the page cache (`rampart
/// serve`'s reads) is usually not in the CPU's caches, and the hardware
/// prefetchers alone leave the AES units waiting for it. Asking 4 KiB
/// ahead (one prefetch per cache line, a few loads beside a group's AES
/// instructions) closes much of that gap, more than nearer or farther
/// distances, and does not slow data already in cache. The addresses
/// depend only on the position in the job, never on the data or the key.
const PREFETCH_AHEAD: usize = 4096;

/// Round keys of one direction and of the tweak, read from the
/// [`Schedule`] (which wipes them) as vectors of `L` or single blocks.
struct Keys<'a, L: Lanes, const R: usize> {
    data: &'a [Wide; 15],
    tweak: &'a [Wide; 15],
    lanes: std::marker::PhantomData<L>,
}

impl<'a, L: Lanes, const R: usize> Keys<'a, L, R> {
    #[inline(always)]
    fn new(schedule: &'a Schedule, encrypt: bool) -> Self {
        let data = if encrypt { &schedule.wide_enc } else { &schedule.wide_dec };
        Self { data, tweak: &schedule.wide_tweak, lanes: std::marker::PhantomData }
    }

    /// Data round key `i` (≤ `R`) in every lane.
    #[inline(always)]
    unsafe fn data(&self, i: usize) -> L {
        // SAFETY: each `Wide` is 64 readable bytes; `L` loads at most 64.
        unsafe { L::load_key(&self.data[i]) }
    }

    /// Tweak round key `i` (≤ `R`) in every lane.
    #[inline(always)]
    unsafe fn tweak(&self, i: usize) -> L {
        // SAFETY: as above.
        unsafe { L::load_key(&self.tweak[i]) }
    }

    /// Data round key `i` (≤ `R`), one block.
    #[inline(always)]
    unsafe fn data1(&self, i: usize) -> __m128i {
        // SAFETY: as above; 16 of the 64 bytes.
        unsafe { _mm_loadu_si128(self.data[i].0.as_ptr().cast()) }
    }

    /// Tweak round key `i` (≤ `R`), one block.
    #[inline(always)]
    unsafe fn tweak1(&self, i: usize) -> __m128i {
        // SAFETY: as above; 16 of the 64 bytes.
        unsafe { _mm_loadu_si128(self.tweak[i].0.as_ptr().cast()) }
    }
}

/// AES-encrypts one block with the tweak key.
#[inline(always)]
unsafe fn encrypt_tweak<L: Lanes, const R: usize>(keys: &Keys<'_, L, R>, t: __m128i) -> __m128i {
    // SAFETY: AES-NI (caller's features).
    unsafe {
        let mut x = _mm_xor_si128(t, keys.tweak1(0));
        for i in 1..R {
            x = _mm_aesenc_si128(x, keys.tweak1(i));
        }
        _mm_aesenclast_si128(x, keys.tweak1(R))
    }
}

/// Sectors whose tweaks are encrypted together: [`WIDTH`] independent
/// AES chains of the widest vectors (32 tweaks on 512-bit ones). Fewer
/// chains (eight tweaks at a time) left the tweak rounds' latency exposed
/// before every eighth sector.
const TWEAK_BATCH: usize = WIDTH * 4;

/// The encrypted plain64 tweaks of sectors `first + i * step` for `i` <
/// `n` (≤ `WIDTH * L::BLOCKS`) into `out` (16 bytes each), in up to
/// [`WIDTH`] independent chains of `L::BLOCKS` tweaks; `out` holds whole
/// vectors (up to `L::BLOCKS - 1` tweaks past `n` are written too).
#[inline(always)]
unsafe fn encrypt_tweaks<L: Lanes, const R: usize, const N: usize>(
    keys: &Keys<'_, L, R>,
    first: u64,
    step: u64,
    n: usize,
    out: &mut [u128; N],
) {
    let vectors = n.div_ceil(L::BLOCKS);
    // Constant-folded where `n` is; the stores below rely on it.
    assert!(vectors <= WIDTH && vectors * L::BLOCKS <= N);
    // SAFETY: the features of `L` (caller's); the stores write
    // `vectors * L::BLOCKS` ≤ `N` blocks of `out` (asserted).
    unsafe {
        let mut x = [keys.tweak(0); WIDTH];
        for (v, xv) in x.iter_mut().take(vectors).enumerate() {
            let at = first.wrapping_add(step.wrapping_mul((v * L::BLOCKS) as u64));
            *xv = L::numbers(at, step).xor(keys.tweak(0));
        }
        for i in 1..R {
            let key = keys.tweak(i);
            for xv in x.iter_mut().take(vectors) {
                *xv = xv.enc(key);
            }
        }
        for (v, xv) in x.iter_mut().take(vectors).enumerate() {
            xv.enc_last(keys.tweak(R)).store(out.as_mut_ptr().add(v * L::BLOCKS).cast());
        }
    }
}

/// One block of XTS with tweak `t` (the data key of `keys`).
#[inline(always)]
unsafe fn block<L: Lanes, const R: usize, const ENC: bool>(
    keys: &Keys<'_, L, R>,
    x: __m128i,
    t: __m128i,
) -> __m128i {
    // SAFETY: AES-NI and SSE2 (caller's features).
    unsafe {
        let mut x = _mm_xor_si128(_mm_xor_si128(x, t), keys.data1(0));
        for i in 1..R {
            let key = keys.data1(i);
            x = if ENC { _mm_aesenc_si128(x, key) } else { _mm_aesdec_si128(x, key) };
        }
        let last = _mm_xor_si128(keys.data1(R), t);
        if ENC {
            _mm_aesenclast_si128(x, last)
        } else {
            _mm_aesdeclast_si128(x, last)
        }
    }
}

/// [`Lanes::groups`] in intrinsics: each AES instruction reads its round
/// key from the [`Schedule`] (the vectors of data and tweaks fill the
/// registers).
///
/// # Safety
/// As [`Lanes::groups`].
#[inline(always)]
unsafe fn groups_intrinsics<L: Lanes, const R: usize, const ENC: bool>(
    keys: &Keys<'_, L, R>,
    src: *const u8,
    dst: *mut u8,
    groups: usize,
    prefetch_end: *const u8,
    t: &mut [L; WIDTH],
    advance_last: bool,
) {
    let w = L::BLOCKS;
    // SAFETY: every load and store stays within the `groups` groups of
    // `src`/`dst` (the caller's contract); each vector is loaded before it
    // is stored, so `src == dst` is fine.
    unsafe {
        for g in 0..groups {
            let at = g * WIDTH * w * 16;
            let from = src.add(at);
            if from < prefetch_end {
                // A prefetch never faults; the bound only keeps it from
                // fetching lines nobody will read.
                let ahead = from.wrapping_add(PREFETCH_AHEAD);
                for line in (0..WIDTH * w * 16).step_by(64) {
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(line).cast());
                }
            }
            let mut x = *t;
            for j in 0..WIDTH {
                x[j] = L::load(from.add(j * w * 16)).xor3(t[j], keys.data(0));
            }
            // The next group's tweaks right away, not after this group's
            // AES rounds: queued behind them, they would hold up the start
            // of the next group.
            let mut next = *t;
            if g + 1 < groups || advance_last {
                for tj in &mut next {
                    *tj = tj.advance();
                }
            }
            for i in 1..R {
                let key = keys.data(i);
                for v in &mut x {
                    *v = if ENC { v.enc(key) } else { v.dec(key) };
                }
            }
            for j in 0..WIDTH {
                let last = keys.data(R).xor(t[j]);
                let y = if ENC { x[j].enc_last(last) } else { x[j].dec_last(last) };
                y.store(dst.add(at + j * w * 16));
            }
            *t = next;
        }
    }
}

/// XTS of `blocks` whole blocks at `src`→`dst`, the first with tweak `t0`;
/// returns the tweak of the block after them. `readable` is how many bytes
/// the job still holds from `src` on (at least `blocks * 16`): the reach
/// of the prefetches.
///
/// # Safety
/// The features of `L`; `src`/`dst` valid for `blocks * 16` bytes, equal or
/// disjoint.
#[inline(always)]
unsafe fn blocks<L: Lanes, const R: usize, const ENC: bool>(
    keys: &Keys<'_, L, R>,
    src: *const u8,
    dst: *mut u8,
    blocks: usize,
    readable: usize,
    t0: __m128i,
    need_next: bool,
) -> __m128i {
    let w = L::BLOCKS;
    // SAFETY: every load and store below stays within `blocks * 16` bytes
    // of `src`/`dst` (the loop conditions bound `done`); features per the
    // caller. Each vector is loaded before it is stored, so `src == dst`
    // is fine.
    unsafe {
        let mut t = L::group(t0);
        let groups = blocks / (WIDTH * w);
        let mut done = groups * WIDTH * w;
        if groups > 0 {
            let prefetch_end = src.wrapping_add(readable.saturating_sub(PREFETCH_AHEAD));
            L::groups::<R, ENC>(
                keys,
                src,
                dst,
                groups,
                prefetch_end,
                &mut t,
                done < blocks || need_next,
            );
        }
        // Fewer than `WIDTH` vectors left: one at a time, each tweak from
        // the last (not `t[j]`, whose variable index would keep `t` in
        // memory throughout the main loop).
        let mut tv = t[0];
        while blocks - done >= w {
            let at = done * 16;
            let mut v = L::load(src.add(at)).xor3(tv, keys.data(0));
            for i in 1..R {
                let key = keys.data(i);
                v = if ENC { v.enc(key) } else { v.dec(key) };
            }
            let last = keys.data(R).xor(tv);
            let y = if ENC { v.enc_last(last) } else { v.dec_last(last) };
            y.store(dst.add(at));
            done += w;
            tv = tv.step();
        }
        let mut tn = tv.first();
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

/// The encrypted tweak of sector `number`, taken from
/// [`Schedule::next`] when the last call left it there, and the one of
/// `number + step` left there for the next call.
#[inline(always)]
unsafe fn one_sector_tweak<L: Lanes, const R: usize>(
    schedule: &Schedule,
    keys: &Keys<'_, L, R>,
    number: u64,
    step: u64,
) -> __m128i {
    let after = number.wrapping_add(step);
    let mut ready = schedule.next.get();
    let mut next = NextTweak { number: after, encrypted: 0, valid: true };
    let mut pair = [0u128; 4];
    // SAFETY: the features of `L` (caller's); the stores write the 16
    // bytes of `next.encrypted`.
    let t = unsafe {
        let (t, following) = if ready.valid && ready.number == number {
            // The next call's tweak is computed before this call's blocks
            // are issued, so that its rounds (older in the instruction
            // stream) get AES slots as soon as they are ready instead of
            // queueing behind the blocks and holding up the next call.
            let t = _mm_loadu_si128(std::ptr::from_ref(&ready.encrypted).cast());
            (t, encrypt_tweak(keys, _mm_set_epi64x(0, after as i64)))
        } else {
            // Both in one vector chain (two chains on 128-bit vectors).
            encrypt_tweaks::<L, R, 4>(keys, number, step, 2, &mut pair);
            let pair = pair.as_ptr().cast::<__m128i>();
            (_mm_loadu_si128(pair), _mm_loadu_si128(pair.add(1)))
        };
        _mm_storeu_si128(std::ptr::from_mut(&mut next.encrypted).cast(), following);
        t
    };
    schedule.next.set(next);
    next.encrypted.zeroize();
    ready.encrypted.zeroize();
    pair.zeroize();
    t
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
        if count == 1 {
            let t = one_sector_tweak(schedule, &keys, job.first, job.step);
            blocks::<L, R, ENC>(&keys, job.src, job.dst, per_sector, job.len, t, false);
            return;
        }
        let mut sector = 0;
        let mut number = job.first;
        let batch = WIDTH * L::BLOCKS;
        // Wiped as 16-byte words, not 512 single bytes.
        let mut tweaks = [0u128; TWEAK_BATCH];
        while sector < count {
            let n = (count - sector).min(batch);
            encrypt_tweaks::<L, R, TWEAK_BATCH>(&keys, number, job.step, n, &mut tweaks);
            for i in 0..n {
                let t = _mm_loadu_si128(tweaks.as_ptr().add(i).cast());
                let at = sector * job.sector;
                blocks::<L, R, ENC>(
                    &keys,
                    job.src.add(at),
                    job.dst.add(at),
                    per_sector,
                    job.len - at,
                    t,
                    false,
                );
                sector += 1;
            }
            number = number.wrapping_add((batch as u64).wrapping_mul(job.step));
        }
        tweaks.zeroize();
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
        let t0 = encrypt_tweak(&keys, _mm_loadu_si128(tweak.as_ptr().cast()));
        let partial = job.len % 16;
        let whole = job.len / 16;
        let bulk = if partial == 0 { whole } else { whole - 1 };
        let tn = blocks::<L, R, ENC>(&keys, job.src, job.dst, bulk, job.len, t0, true);
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
    Z4<false>,
    "aes,pclmulqdq,sse2,avx2,avx512f,avx512bw,vaes,vpclmulqdq",
    sectors_vaes512,
    unit_vaes512
);
entry_points!(
    Z4<true>,
    "aes,pclmulqdq,sse2,avx2,avx512f,avx512bw,vaes,vpclmulqdq",
    sectors_vaes512_byte_shift,
    unit_vaes512_byte_shift
);
entry_points!(Y2, "aes,pclmulqdq,sse2,avx2,vaes,vpclmulqdq", sectors_vaes256, unit_vaes256);
entry_points!(X1, "aes,pclmulqdq,sse2", sectors_aesni, unit_aesni);

// ---------------------------------------------------------------------------
// The instruction ceiling, for `rampart bench`.

/// Bytes per second that the AES instructions on this CPU's widest vectors
/// (VAES on 512 or 256-bit registers, else AES-NI on 128-bit ones) can push
/// through AES with `rounds` rounds on one core, with no memory traffic at
/// all: [`CEILING_CHAINS`] independent vectors cycle through the rounds for
/// about `seconds`. `None` without AES-NI.
pub(crate) fn register_ceiling(rounds: usize, seconds: f64) -> Option<crate::CeilingRate> {
    let (vector_bits, run): (u32, unsafe fn(usize, u64) -> u64) = if Path::Vaes512.available() {
        (512, ceiling_loop_512)
    } else if Path::Vaes256.available() {
        (256, ceiling_loop_256)
    } else if Path::AesNi.available() {
        (128, ceiling_loop_128)
    } else {
        return None;
    };
    let bytes_per_loop = 100_000 * CEILING_CHAINS as u64 * u64::from(vector_bits / 8);
    let start = std::time::Instant::now();
    let cpu_start = crate::thread_cpu_time();
    let mut bytes = 0u64;
    let mut sink = 0u64;
    while start.elapsed().as_secs_f64() < seconds {
        // SAFETY: `run` is the loop whose features were detected just above.
        sink ^= unsafe { run(rounds, 100_000) };
        bytes += bytes_per_loop;
    }
    std::hint::black_box(sink);
    let cpu = match (cpu_start, crate::thread_cpu_time()) {
        (Some(from), Some(to)) => Some(bytes as f64 / (to - from).as_secs_f64().max(1e-9)),
        _ => None,
    };
    Some(crate::CeilingRate {
        wall: bytes as f64 / start.elapsed().as_secs_f64(),
        cpu,
        vector_bits,
    })
}

/// Independent AES chains of the ceiling loops: enough to cover the AES
/// latency of every core measured (Zen 5 saturates at four), while staying
/// within the 16 registers of AVX2 and SSE with the key beside them (no
/// spills).
const CEILING_CHAINS: usize = 12;

/// One ceiling loop per vector width: `iterations` × ([`CEILING_CHAINS`]
/// vectors × `rounds` AES rounds), the key in a register, nothing loaded or
/// stored inside the loop.
macro_rules! ceiling_loop {
    ($name:ident, $features:literal, $set1:ident, $aesenc:ident, |$v:ident| $low64:expr) => {
        /// # Safety
        #[doc = concat!("The CPU has ", $features, ".")]
        #[target_feature(enable = $features)]
        unsafe fn $name(rounds: usize, iterations: u64) -> u64 {
            let key = std::hint::black_box($set1(0x0123_4567_89ab_cdef));
            let mut x = [key; CEILING_CHAINS];
            for (i, v) in x.iter_mut().enumerate() {
                *v = $set1(i as i64);
            }
            for _ in 0..iterations {
                for _ in 0..rounds {
                    for v in &mut x {
                        *v = $aesenc(*v, key);
                    }
                }
            }
            let mut out = 0u64;
            for $v in x {
                out ^= $low64 as u64;
            }
            out
        }
    };
}

ceiling_loop!(ceiling_loop_512, "avx512f,vaes", _mm512_set1_epi64, _mm512_aesenc_epi128, |v| {
    _mm_cvtsi128_si64x(_mm512_castsi512_si128(v))
});
ceiling_loop!(ceiling_loop_256, "avx2,vaes", _mm256_set1_epi64x, _mm256_aesenc_epi128, |v| {
    _mm_cvtsi128_si64x(_mm256_castsi256_si128(v))
});
ceiling_loop!(ceiling_loop_128, "aes,sse2", _mm_set1_epi64x, _mm_aesenc_si128, |v| {
    _mm_cvtsi128_si64x(v)
});
