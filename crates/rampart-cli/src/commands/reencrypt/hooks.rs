//! The test hooks of a reencryption run: stop cleanly, or crash as if
//! killed, after a number of hotzones, as the environment says. Only a
//! build with the `crash-hooks` feature (the integration tests') reads
//! them; the shipped binary holds none of this.

/// When a run stops or crashes on purpose.
#[derive(Debug, Default, Clone, Copy)]
pub struct Hooks {
    /// Stop cleanly after this many hotzones.
    pub stop_after: Option<u64>,
    /// After this many hotzones, write half of the next and exit with
    /// status 137 as if killed, leaving the header mid-hotzone.
    pub crash_after: Option<u64>,
}

#[cfg(feature = "crash-hooks")]
const CRASH_ENV: &str = "RAMPART_REENCRYPT_CRASH_AFTER";
#[cfg(feature = "crash-hooks")]
const STOP_ENV: &str = "RAMPART_REENCRYPT_STOP_AFTER";

#[cfg(feature = "crash-hooks")]
impl Hooks {
    pub fn from_env() -> anyhow::Result<Self> {
        Ok(Self { stop_after: env_number(STOP_ENV)?, crash_after: env_number(CRASH_ENV)? })
    }

    /// A served volume's run happens in the server, which cannot crash on
    /// the command's behalf.
    pub fn check_online(self) -> anyhow::Result<()> {
        if self.crash_after.is_some() {
            return Err(crate::UsageError(format!("${CRASH_ENV} works offline only")).into());
        }
        Ok(())
    }
}

#[cfg(feature = "crash-hooks")]
fn env_number(name: &str) -> anyhow::Result<Option<u64>> {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .map(Some)
            .map_err(|_| crate::UsageError(format!("${name} must be a number, not '{v}'")).into()),
        Err(_) => Ok(None),
    }
}

#[cfg(not(feature = "crash-hooks"))]
impl Hooks {
    pub fn from_env() -> anyhow::Result<Self> {
        Ok(Self::default())
    }

    pub fn check_online(self) -> anyhow::Result<()> {
        Ok(())
    }
}
