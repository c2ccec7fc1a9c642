//! CPU features that decide which AES implementation runs.

/// The instruction-set extensions that matter for Rampart's crypto, as
/// detected at run time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)]
pub struct CpuFeatures {
    pub aes_ni: bool,
    pub pclmulqdq: bool,
    pub vaes: bool,
    pub vpclmulqdq: bool,
    pub avx2: bool,
    pub avx512f: bool,
    pub avx512vbmi2: bool,
    pub rdrand: bool,
    pub rdseed: bool,
    pub sha_ni: bool,
}

impl CpuFeatures {
    #[must_use]
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            Self {
                aes_ni: std::arch::is_x86_feature_detected!("aes"),
                pclmulqdq: std::arch::is_x86_feature_detected!("pclmulqdq"),
                vaes: std::arch::is_x86_feature_detected!("vaes"),
                vpclmulqdq: std::arch::is_x86_feature_detected!("vpclmulqdq"),
                avx2: std::arch::is_x86_feature_detected!("avx2"),
                avx512f: std::arch::is_x86_feature_detected!("avx512f"),
                avx512vbmi2: std::arch::is_x86_feature_detected!("avx512vbmi2"),
                rdrand: std::arch::is_x86_feature_detected!("rdrand"),
                rdseed: std::arch::is_x86_feature_detected!("rdseed"),
                sha_ni: std::arch::is_x86_feature_detected!("sha"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            Self::default()
        }
    }

    /// Name/present pairs in a fixed order, for display and JSON.
    #[must_use]
    pub fn as_list(&self) -> [(&'static str, bool); 10] {
        [
            ("aes-ni", self.aes_ni),
            ("pclmulqdq", self.pclmulqdq),
            ("vaes", self.vaes),
            ("vpclmulqdq", self.vpclmulqdq),
            ("avx2", self.avx2),
            ("avx512f", self.avx512f),
            ("avx512vbmi2", self.avx512vbmi2),
            ("rdrand", self.rdrand),
            ("rdseed", self.rdseed),
            ("sha-ni", self.sha_ni),
        ]
    }

    /// Whether AWS-LC takes its VAES/AVX-512 XTS path (it requires all four).
    #[must_use]
    pub fn xts_avx512(&self) -> bool {
        self.vaes && self.vpclmulqdq && self.avx512f && self.avx512vbmi2
    }

    /// Short name of the AES instructions AWS-LC uses for block modes.
    #[must_use]
    pub fn aes_engine(&self) -> &'static str {
        if self.aes_ni {
            "aes-ni"
        } else {
            "constant-time software"
        }
    }
}

/// The features of the running CPU, detected once.
#[must_use]
pub fn features() -> CpuFeatures {
    static FEATURES: std::sync::OnceLock<CpuFeatures> = std::sync::OnceLock::new();
    *FEATURES.get_or_init(CpuFeatures::detect)
}
