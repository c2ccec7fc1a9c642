//! SHA-256 of several independent messages at once with the SHA
//! extensions (SHA-NI), for the checksums of a reencryption's resilience
//! data: one digest per 4096-byte block of every hotzone.
//!
//! One message at a time, `sha256rnds2` waits for the previous round's
//! result while the unit could already start another, so a one-message
//! hash (AWS-LC's, OpenSSL's) leaves it idle most cycles. Messages of
//! equal length go through the rounds side by side, in [`LANES`]
//! independent dependency chains that keep the unit busy. The arithmetic is FIPS 180-4's; the state layout
//! (ABEF/CDGH) is what the instructions take.

#![allow(unsafe_code)]

/// Messages hashed side by side: enough independent chains to keep the
/// SHA unit busy; more only spill registers (BENCHMARKS.md, "Re-encryption",
/// has the measurements).
pub(crate) const LANES: usize = 4;

/// FIPS 180-4, 5.3.3.
pub(crate) const INITIAL: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

/// FIPS 180-4, 4.2.2.
const K: [u32; 64] = [
    0x428a_2f98,
    0x7137_4491,
    0xb5c0_fbcf,
    0xe9b5_dba5,
    0x3956_c25b,
    0x59f1_11f1,
    0x923f_82a4,
    0xab1c_5ed5,
    0xd807_aa98,
    0x1283_5b01,
    0x2431_85be,
    0x550c_7dc3,
    0x72be_5d74,
    0x80de_b1fe,
    0x9bdc_06a7,
    0xc19b_f174,
    0xe49b_69c1,
    0xefbe_4786,
    0x0fc1_9dc6,
    0x240c_a1cc,
    0x2de9_2c6f,
    0x4a74_84aa,
    0x5cb0_a9dc,
    0x76f9_88da,
    0x983e_5152,
    0xa831_c66d,
    0xb003_27c8,
    0xbf59_7fc7,
    0xc6e0_0bf3,
    0xd5a7_9147,
    0x06ca_6351,
    0x1429_2967,
    0x27b7_0a85,
    0x2e1b_2138,
    0x4d2c_6dfc,
    0x5338_0d13,
    0x650a_7354,
    0x766a_0abb,
    0x81c2_c92e,
    0x9272_2c85,
    0xa2bf_e8a1,
    0xa81a_664b,
    0xc24b_8b70,
    0xc76c_51a3,
    0xd192_e819,
    0xd699_0624,
    0xf40e_3585,
    0x106a_a070,
    0x19a4_c116,
    0x1e37_6c08,
    0x2748_774c,
    0x34b0_bcb5,
    0x391c_0cb3,
    0x4ed8_aa4a,
    0x5b9c_ca4f,
    0x682e_6ff3,
    0x748f_82ee,
    0x78a5_636f,
    0x84c8_7814,
    0x8cc7_0208,
    0x90be_fffa,
    0xa450_6ceb,
    0xbef9_a3f7,
    0xc671_78f2,
];

/// Whether this CPU has what [`digest_lanes`] needs.
pub(crate) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        has!("sha") && has!("sse2") && has!("ssse3") && has!("sse4.1")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The message padding of FIPS 180-4 5.1.1 for a message of `len` bytes
/// whose whole 64-byte blocks were hashed already: the last one or two
/// blocks, with the rest of the message (`tail`, shorter than 64 bytes).
pub(crate) fn final_blocks(tail: &[u8], len: usize) -> ([u8; 128], usize) {
    let mut blocks = [0u8; 128];
    blocks[..tail.len()].copy_from_slice(tail);
    blocks[tail.len()] = 0x80;
    let used = if tail.len() < 56 { 64 } else { 128 };
    // Lengths are bounded by memory: far below 2^61 bytes.
    let bits = (len as u64).wrapping_mul(8);
    blocks[used - 8..used].copy_from_slice(&bits.to_be_bytes());
    (blocks, used)
}

/// The SHA-256 digests of `LANES` messages of one length, `messages[i]`
/// into `out[i]`. The caller checks [`available`] first.
#[cfg(target_arch = "x86_64")]
pub(crate) fn digest_lanes(messages: [&[u8]; LANES], out: [&mut [u8; 32]; LANES]) {
    let len = messages[0].len();
    debug_assert!(messages.iter().all(|m| m.len() == len));
    let whole = len / 64 * 64;
    let mut state = [INITIAL; LANES];
    let mut tails = [([0u8; 128], 0usize); LANES];
    for (tail, message) in tails.iter_mut().zip(messages) {
        *tail = final_blocks(&message[whole..], len);
    }
    // SAFETY: `available` found the SHA extensions and SSE4.1 (the
    // caller's contract), the only requirement of the function; every
    // slice passed holds whole 64-byte blocks.
    unsafe {
        compress(&mut state, messages.map(|m| &m[..whole]));
        let used = tails[0].1;
        compress(&mut state, std::array::from_fn(|i| &tails[i].0[..used]));
    }
    for (digest, words) in out.into_iter().zip(state) {
        for (bytes, word) in digest.chunks_exact_mut(4).zip(words) {
            bytes.copy_from_slice(&word.to_be_bytes());
        }
    }
}

/// Runs the SHA-256 compression function of each lane over its blocks
/// (all lanes hold the same number of whole 64-byte blocks).
///
/// # Safety
/// The CPU must have the SHA extensions and SSE4.1.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
unsafe fn compress(state: &mut [[u32; 8]; LANES], blocks: [&[u8]; LANES]) {
    use std::arch::x86_64::{
        __m128i, _mm_add_epi32, _mm_alignr_epi8, _mm_blend_epi16, _mm_loadu_si128, _mm_set_epi64x,
        _mm_sha256msg1_epu32, _mm_sha256msg2_epu32, _mm_sha256rnds2_epu32, _mm_shuffle_epi32,
        _mm_shuffle_epi8, _mm_storeu_si128,
    };
    let count = blocks[0].len() / 64;
    // Big-endian words of the message, little-endian lanes.
    let swap = _mm_set_epi64x(0x0c0d_0e0f_0809_0a0b, 0x0405_0607_0001_0203);
    let mut abef = [_mm_set_epi64x(0, 0); LANES];
    let mut cdgh = [_mm_set_epi64x(0, 0); LANES];
    for lane in 0..LANES {
        // SAFETY: [u32; 8] holds two 16-byte vectors; unaligned loads of
        // words 0..4 and 4..8.
        let dcba = unsafe { _mm_loadu_si128(state[lane].as_ptr().cast()) };
        // SAFETY: as above, the second vector (words 4..8).
        let hgfe = unsafe { _mm_loadu_si128(state[lane].as_ptr().add(4).cast()) };
        let cdab = _mm_shuffle_epi32(dcba, 0xb1);
        let efgh = _mm_shuffle_epi32(hgfe, 0x1b);
        abef[lane] = _mm_alignr_epi8(cdab, efgh, 8);
        cdgh[lane] = _mm_blend_epi16(efgh, cdab, 0xf0);
    }
    for block in 0..count {
        let saved = (abef, cdgh);
        // The last four groups of message words of each lane.
        let mut w = [[_mm_set_epi64x(0, 0); 4]; LANES];
        for group in 0..16 {
            // SAFETY: K has 64 words; group < 16.
            let k = unsafe { _mm_loadu_si128(K.as_ptr().add(group * 4).cast::<__m128i>()) };
            for lane in 0..LANES {
                let words = if group < 4 {
                    // SAFETY: block < count, so the 16 bytes at
                    // block * 64 + group * 16 are inside the slice.
                    let at = unsafe { blocks[lane].as_ptr().add(block * 64 + group * 16) };
                    // SAFETY: `at` points at those 16 bytes; an unaligned load.
                    let message = unsafe { _mm_loadu_si128(at.cast()) };
                    _mm_shuffle_epi8(message, swap)
                } else {
                    // Groups g-4 .. g-1 sit at g % 4 .. (g + 3) % 4.
                    let w = &w[lane];
                    let sum = _mm_add_epi32(
                        _mm_sha256msg1_epu32(w[group % 4], w[(group + 1) % 4]),
                        _mm_alignr_epi8(w[(group + 3) % 4], w[(group + 2) % 4], 4),
                    );
                    _mm_sha256msg2_epu32(sum, w[(group + 3) % 4])
                };
                w[lane][group % 4] = words;
                let rounds = _mm_add_epi32(words, k);
                cdgh[lane] = _mm_sha256rnds2_epu32(cdgh[lane], abef[lane], rounds);
                // Two rounds on, the ABEF just computed is the next CDGH.
                abef[lane] =
                    _mm_sha256rnds2_epu32(abef[lane], cdgh[lane], _mm_shuffle_epi32(rounds, 0x0e));
            }
        }
        for lane in 0..LANES {
            abef[lane] = _mm_add_epi32(abef[lane], saved.0[lane]);
            cdgh[lane] = _mm_add_epi32(cdgh[lane], saved.1[lane]);
        }
    }
    for lane in 0..LANES {
        let feba = _mm_shuffle_epi32(abef[lane], 0x1b);
        let dchg = _mm_shuffle_epi32(cdgh[lane], 0xb1);
        let dcba = _mm_blend_epi16(feba, dchg, 0xf0);
        let hgfe = _mm_alignr_epi8(dchg, feba, 8);
        // SAFETY: as for the loads.
        unsafe {
            _mm_storeu_si128(state[lane].as_mut_ptr().cast(), dcba);
            _mm_storeu_si128(state[lane].as_mut_ptr().add(4).cast(), hgfe);
        }
    }
}
