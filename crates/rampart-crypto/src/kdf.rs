use std::num::NonZeroU32;

use argon2::{Algorithm, Argon2, AssociatedData, ParamsBuilder, Version};

use crate::{CryptoError, HashAlg, Result};

/// PBKDF2-HMAC (RFC 8018) into `out`.
pub fn pbkdf2(
    alg: HashAlg,
    password: &[u8],
    salt: &[u8],
    iterations: u32,
    out: &mut [u8],
) -> Result<()> {
    let iterations = NonZeroU32::new(iterations)
        .ok_or(CryptoError::InvalidParameter("PBKDF2 iterations must be at least 1"))?;
    if out.is_empty() {
        return Err(CryptoError::InvalidParameter("PBKDF2 output must not be empty"));
    }
    aws_lc_rs::pbkdf2::derive(alg.pbkdf2_alg(), iterations, salt, password, out);
    Ok(())
}

/// The Argon2 variants LUKS2 uses (and Argon2d, for completeness of the
/// RFC 9106 test vectors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Argon2Variant {
    Argon2i,
    Argon2id,
    Argon2d,
}

impl Argon2Variant {
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Argon2i => "argon2i",
            Self::Argon2id => "argon2id",
            Self::Argon2d => "argon2d",
        }
    }

    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "argon2i" => Some(Self::Argon2i),
            "argon2id" => Some(Self::Argon2id),
            "argon2d" => Some(Self::Argon2d),
            _ => None,
        }
    }

    fn algorithm(self) -> Algorithm {
        match self {
            Self::Argon2i => Algorithm::Argon2i,
            Self::Argon2id => Algorithm::Argon2id,
            Self::Argon2d => Algorithm::Argon2d,
        }
    }
}

/// Argon2 cost parameters (version 0x13 always), named as LUKS2 names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Argon2Params {
    pub variant: Argon2Variant,
    /// Passes over memory (LUKS2 `time`).
    pub time: u32,
    /// Memory in KiB (LUKS2 `memory`).
    pub memory_kib: u32,
    /// Lanes, computed on as many threads (LUKS2 `cpus`).
    pub parallelism: u32,
}

/// Argon2 (RFC 9106, version 0x13) into `out`; lanes run on parallel threads.
pub fn argon2(params: &Argon2Params, password: &[u8], salt: &[u8], out: &mut [u8]) -> Result<()> {
    argon2_with_secret(params, password, salt, &[], &[], out)
}

/// Argon2 with the optional secret value K and associated data X of RFC 9106.
pub fn argon2_with_secret(
    params: &Argon2Params,
    password: &[u8],
    salt: &[u8],
    secret: &[u8],
    associated_data: &[u8],
    out: &mut [u8],
) -> Result<()> {
    let data = AssociatedData::new(associated_data).map_err(|_| {
        CryptoError::InvalidParameter("Argon2 associated data longer than 32 bytes")
    })?;
    let built = ParamsBuilder::new()
        .m_cost(params.memory_kib)
        .t_cost(params.time)
        .p_cost(params.parallelism)
        .data(data)
        .output_len(out.len())
        .build()
        .map_err(argon2_error)?;
    let context = if secret.is_empty() {
        Argon2::new(params.variant.algorithm(), Version::V0x13, built)
    } else {
        Argon2::new_with_secret(secret, params.variant.algorithm(), Version::V0x13, built)
            .map_err(argon2_error)?
    };
    context.hash_password_into(password, salt, out).map_err(argon2_error)
}

fn argon2_error(error: argon2::Error) -> CryptoError {
    use argon2::Error as E;
    CryptoError::InvalidParameter(match error {
        E::MemoryTooLittle => "Argon2 memory below 8 KiB per lane",
        E::MemoryTooMuch => "Argon2 memory too large",
        E::TimeTooSmall => "Argon2 time cost must be at least 1",
        E::ThreadsTooFew => "Argon2 parallelism must be at least 1",
        E::ThreadsTooMany => "Argon2 parallelism too large",
        E::SaltTooShort => "Argon2 salt shorter than 8 bytes",
        E::SaltTooLong => "Argon2 salt too long",
        E::OutputTooShort => "Argon2 output shorter than 4 bytes",
        E::OutputTooLong => "Argon2 output too long",
        E::PwdTooLong => "Argon2 password too long",
        E::SecretTooLong => "Argon2 secret too long",
        E::OutOfMemory => "Argon2 could not allocate its memory",
        _ => "Argon2 parameters rejected",
    })
}
