//! A volume as `rampart serve` exports it: the device clients see, which
//! an online reencryption swaps between the single-key and the two-key
//! layer, and what the control socket needs to run one (see
//! [`crate::control`]).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rampart_crypto::SecretBytes;
use rampart_kms_client::binding::bound_tokens;
use rampart_volume::reencrypt::{start_decrypt_shift_on, SharedDevice};
use rampart_volume::{
    segment_device, BlockDevice, Outcome, ReencryptError, ReencryptOptions, ReencryptingDevice,
    Reencryption, ReplaceableDevice, VolumePaths,
};

use crate::control::ControlTarget;
use crate::error::ServeError;
use crate::protocol::{DecryptAttached, RunOptions};

/// A volume `serve` writes, with what an online reencryption needs.
pub struct ServedVolume {
    /// Where the header is: a decryption moving the data over an attached
    /// header takes it to a file of its own.
    paths: Mutex<VolumePaths>,
    /// The data device, opened once (the data-writer lock is on it).
    raw: SharedDevice,
    /// What the export serves.
    device: Arc<ReplaceableDevice>,
    /// The two-key layer while a reencryption is under way.
    reencrypting: Mutex<Option<Arc<ReencryptingDevice>>>,
    /// Served read-only: a reencryption is refused (and, since the socket
    /// answers, `reencrypt` does not re-encrypt offline under the server).
    read_only: bool,
    /// Unlocked through a key-manager binding: its key and the version the
    /// heartbeat reports, moved to the newest binding of that key when a
    /// reencryption (a rebind) finishes.
    binding: Mutex<Option<(String, Arc<AtomicU32>)>>,
}

impl ServedVolume {
    #[must_use]
    pub fn new(
        paths: VolumePaths,
        raw: SharedDevice,
        device: Arc<dyn BlockDevice>,
        reencrypting: Option<Arc<ReencryptingDevice>>,
        read_only: bool,
    ) -> Self {
        Self {
            paths: Mutex::new(paths),
            raw,
            device: Arc::new(ReplaceableDevice::new(device)),
            reencrypting: Mutex::new(reencrypting),
            read_only,
            binding: Mutex::new(None),
        }
    }

    /// The volume was unlocked through a binding of key `key`: after a
    /// rebind, `version` follows the binding of the new volume key.
    pub fn follow_binding(&self, key: &str, version: Arc<AtomicU32>) {
        *self.binding.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((key.to_owned(), version));
    }

    /// After a finished reencryption: the newest version of the followed
    /// key among the volume's bindings, which now all belong to the new
    /// volume key (the old ones were removed with the old keyslots).
    fn update_binding(&self, luks: &rampart_luks::Luks) {
        let binding = self.binding.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((key, version)) = binding.as_ref() else {
            return;
        };
        let newest = bound_tokens(luks.tokens())
            .into_iter()
            .filter_map(|(_, t)| t.ok())
            .filter(|t| luks.active_keyslots().contains(&t.slot) && &t.key == key)
            .map(|t| t.key_version)
            .max();
        if let Some(newest) = newest {
            version.store(newest, Ordering::Relaxed);
        }
    }

    fn paths(&self) -> VolumePaths {
        self.paths.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The device to export.
    #[must_use]
    pub fn device(&self) -> Arc<dyn BlockDevice> {
        Arc::clone(&self.device) as Arc<dyn BlockDevice>
    }

    /// Runs the reencryption the header records, on the served device.
    fn run_reencryption(
        &self,
        run: RunOptions,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Outcome, ServeError> {
        let paths = self.paths();
        self.refuse_read_only(&paths)?;
        // Checks both keys against the header, and holds cryptsetup's
        // reencryption lock for the run.
        let job = Reencryption::open_served(&paths, Arc::clone(&self.raw), old_key, new_key)?;
        let device = {
            let mut slot = self.reencrypting.lock().unwrap_or_else(PoisonError::into_inner);
            match &*slot {
                Some(device) => Arc::clone(device),
                None => {
                    let (_, luks, _) = paths.load_released()?;
                    let device = Arc::new(ReencryptingDevice::on(
                        Arc::clone(&self.raw),
                        &luks,
                        old_key,
                        new_key,
                    )?);
                    self.device.replace(Arc::clone(&device) as Arc<dyn BlockDevice>);
                    *slot = Some(Arc::clone(&device));
                    device
                }
            }
        };
        let options = ReencryptOptions {
            hotzone_size: run.hotzone_size,
            stop_after: run.stop_after,
            crash_after: None,
            serving: Some(device),
        };
        let outcome = job.run(&options, stop, progress).map_err(|e| match e {
            ReencryptError::Volume(e) => ServeError::Volume(e),
            other => ServeError::Reencrypt(other),
        })?;
        if outcome == Outcome::Finished {
            // One key again: back to the plain layer.
            let (_, luks, _) = paths.load_released()?;
            // The clients keep the size they know: a data shift leaves the
            // final segment larger than the data was (its last bytes
            // random), which a server started now would serve.
            let len = self.device.len();
            let decrypted = luks.data_map()?.iter().all(|piece| piece.crypt.is_none());
            let single = if decrypted {
                None
            } else {
                Some(segment_device(Arc::clone(&self.raw), &luks, new_key, false)?)
            };
            let plain: Arc<dyn BlockDevice> = match single {
                Some(device) if device.len() == len => Arc::new(device),
                _ => Arc::new(ReencryptingDevice::mapped(
                    Arc::clone(&self.raw),
                    &luks,
                    old_key,
                    new_key,
                    len,
                )?),
            };
            self.update_binding(&luks);
            let mut slot = self.reencrypting.lock().unwrap_or_else(PoisonError::into_inner);
            self.device.replace(plain);
            *slot = None;
        }
        Ok(outcome)
    }

    fn refuse_read_only(&self, paths: &VolumePaths) -> Result<(), ServeError> {
        if self.read_only {
            return Err(ServeError::ReadOnly(paths.data.clone()));
        }
        Ok(())
    }

    /// Starts the decryption of a volume with an attached header that
    /// moves its data down over it, while no client request runs (see the
    /// module documentation), and serves it from then on through the new
    /// header with both pieces of the map.
    fn start_decrypt_shift(
        &self,
        request: &DecryptAttached,
        key: &SecretBytes,
    ) -> Result<(), ServeError> {
        let paths = self.paths();
        self.refuse_read_only(&paths)?;
        if let Some(header) = &paths.header {
            return Err(ServeError::HeaderDetached {
                data: paths.data.clone(),
                header: header.clone(),
            });
        }
        if !request.header.is_absolute() {
            return Err(ServeError::HeaderNotAbsolute(request.header.clone()));
        }
        let resilience = request.resilience()?;
        let pbkdf = request.pbkdf()?;
        let mut slot = self.reencrypting.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            return Err(ServeError::AlreadyReencrypting(paths.data.clone()));
        }
        let detached = VolumePaths::new(&paths.data, Some(&request.header));
        let started = self.device.replace_with(|_| {
            start_decrypt_shift_on(
                &*self.raw,
                &paths.data,
                &request.header,
                key,
                resilience,
                &pbkdf,
            )?;
            let (_, luks, _) = detached.load_released()?;
            let device = Arc::new(ReencryptingDevice::on(
                Arc::clone(&self.raw),
                &luks,
                key,
                &SecretBytes::new(Vec::new()),
            )?);
            *slot = Some(Arc::clone(&device));
            Ok::<_, ServeError>(device as Arc<dyn BlockDevice>)
        });
        // Past the copy over the attached header, the volume's header is
        // the new file, even when a later step failed (it then still
        // describes the volume as it was, which the current layer serves).
        if started.is_ok() || (paths.load_released().is_err() && detached.load_released().is_ok()) {
            *self.paths.lock().unwrap_or_else(PoisonError::into_inner) = detached;
        }
        started
    }
}

impl std::fmt::Debug for ServedVolume {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedVolume")
            .field("paths", &self.paths())
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl ControlTarget for ServedVolume {
    fn reencrypt(
        &self,
        run: RunOptions,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Outcome, ServeError> {
        self.run_reencryption(run, old_key, new_key, stop, progress)
    }

    fn start_decrypt_attached(
        &self,
        request: &DecryptAttached,
        key: &SecretBytes,
    ) -> Result<(), ServeError> {
        self.start_decrypt_shift(request, key)
    }
}
