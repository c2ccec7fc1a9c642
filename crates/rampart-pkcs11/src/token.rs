//! The module's state between `C_Initialize` and `C_Finalize`: its slots
//! (one per configured key manager, each with its kept-open KMIP
//! connections and its login state), its sessions, and the object
//! handles given out.
//!
//! Every function is safe to call from any thread (`CKF_OS_LOCKING_OK`):
//! the tables are behind locks, each session behind its own, and a slot
//! hands each concurrent request a connection of its own, so sixteen
//! threads signing at once use sixteen connections rather than queueing
//! on one.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use cryptoki_sys::*;
use rampart_kms_client::kmip::{KmipClient, TlsVersions};
use rampart_kms_client::Bundle;
use zeroize::Zeroizing;

use crate::config::{SlotConfig, MAX_LABEL};
use crate::connection::{Connections, Remote};
use crate::objects::ObjectInfo;
use crate::operations::Operations;
use crate::rv::{Result, Rv};

/// Most sessions open at once (a bound on what a caller can make us keep).
const MAX_SESSIONS: usize = 4096;
/// Most object handles given out (each is a few hundred bytes).
const MAX_HANDLES: usize = 1 << 20;

/// The module once initialized.
pub(crate) struct Module {
    /// The process that initialized it: after a fork the child must
    /// initialize again (PKCS#11 3.0 §5.1.6), since the connections and
    /// the runtime's thread stayed with the parent.
    pid: u32,
    runtime: tokio::runtime::Runtime,
    pub slots: Vec<Slot>,
    sessions: RwLock<HashMap<CK_SESSION_HANDLE, Arc<Mutex<Session>>>>,
    next_session: AtomicU64,
    handles: Mutex<Handles>,
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("slots", &self.slots.len()).finish_non_exhaustive()
    }
}

/// One key manager reached with one identity.
pub(crate) struct Slot {
    /// The token label, blank-padded to 32 bytes.
    pub label: [u8; MAX_LABEL],
    /// The client's name (the token's serial number is made of it).
    pub client: String,
    pin: Option<Zeroizing<String>>,
    connections: Connections,
    logged_in: AtomicBool,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("client", &self.client).finish_non_exhaustive()
    }
}

/// An open session.
#[derive(Debug)]
pub(crate) struct Session {
    pub slot: CK_SLOT_ID,
    pub flags: CK_FLAGS,
    pub find: Option<FindState>,
    pub operations: Operations,
    /// Session objects (`CKA_TOKEN` false) made in this session,
    /// destroyed in the key manager when it closes.
    pub temporary: Vec<CK_OBJECT_HANDLE>,
}

/// A search in progress (`C_FindObjectsInit` to `C_FindObjectsFinal`).
#[derive(Debug)]
pub(crate) struct FindState {
    pub template: Vec<(CK_ATTRIBUTE_TYPE, Vec<u8>)>,
    /// The next Locate page's offset.
    pub offset: i32,
    pub found: VecDeque<CK_OBJECT_HANDLE>,
    pub exhausted: bool,
}

/// Object handles: each KMIP object keeps one handle for the module's
/// lifetime, so an application may compare them.
#[derive(Debug, Default)]
struct Handles {
    next: CK_OBJECT_HANDLE,
    objects: HashMap<CK_OBJECT_HANDLE, (CK_SLOT_ID, Arc<ObjectInfo>)>,
    by_uid: HashMap<(CK_SLOT_ID, String), CK_OBJECT_HANDLE>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The initialized module.
static MODULE: RwLock<Option<Arc<Module>>> = RwLock::new(None);

/// The module, or `CKR_CRYPTOKI_NOT_INITIALIZED`.
pub(crate) fn module() -> Result<Arc<Module>> {
    let guard = MODULE.read().unwrap_or_else(PoisonError::into_inner);
    match guard.as_ref() {
        Some(m) if m.pid == std::process::id() => Ok(Arc::clone(m)),
        _ => Err(Rv(CKR_CRYPTOKI_NOT_INITIALIZED)),
    }
}

/// `C_Initialize`: reads the configuration and the bundles (no network
/// yet: a key manager that is down does not stop an application from
/// loading the module).
///
/// With `own_threads` the connections are driven by one thread of the
/// module's (which runs `on_thread_start` first); without (the caller set `CKF_LIBRARY_CANT_CREATE_OS_THREADS`,
/// as GnuTLS does), by whichever calling thread is waiting for an answer.
pub(crate) fn initialize(own_threads: bool, on_thread_start: fn()) -> Result<()> {
    let mut guard = MODULE.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(m) = guard.as_ref() {
        if m.pid == std::process::id() {
            return Err(Rv(CKR_CRYPTOKI_ALREADY_INITIALIZED));
        }
        // Inherited through fork: its thread is gone, so it is left as it
        // is rather than shut down.
        if let Some(inherited) = guard.take() {
            std::mem::forget(inherited);
        }
    }
    let configs = crate::config::from_environment().map_err(|message| {
        eprintln!("rampart-pkcs11: {message}");
        Rv(CKR_GENERAL_ERROR)
    })?;
    let mut slots = Vec::with_capacity(configs.len());
    for config in configs {
        slots.push(Slot::new(config).map_err(|message| {
            eprintln!("rampart-pkcs11: {message}");
            Rv(CKR_GENERAL_ERROR)
        })?);
    }
    let runtime = if own_threads {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("rampart-pkcs11")
            .on_thread_start(on_thread_start)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    }
    .map_err(|_| Rv(CKR_NEED_TO_CREATE_THREADS))?;
    *guard = Some(Arc::new(Module {
        pid: std::process::id(),
        runtime,
        slots,
        sessions: RwLock::new(HashMap::new()),
        next_session: AtomicU64::new(1),
        handles: Mutex::new(Handles { next: 1, ..Handles::default() }),
    }));
    Ok(())
}

/// `C_Finalize`.
pub(crate) fn finalize() -> Result<()> {
    let mut guard = MODULE.write().unwrap_or_else(PoisonError::into_inner);
    match guard.take() {
        Some(m) if m.pid == std::process::id() => {
            drop(guard);
            // The runtime stops once the last call in progress lets go.
            drop(m);
            Ok(())
        }
        Some(inherited) => {
            std::mem::forget(inherited);
            Err(Rv(CKR_CRYPTOKI_NOT_INITIALIZED))
        }
        None => Err(Rv(CKR_CRYPTOKI_NOT_INITIALIZED)),
    }
}

impl Slot {
    fn new(config: SlotConfig) -> std::result::Result<Self, String> {
        let bundle = Bundle::read(&config.bundle)
            .map_err(|e| format!("cannot read the bundle {}: {e}", config.bundle.display()))?;
        let prototype = KmipClient::new(&bundle, &config.kmip, TlsVersions::Negotiated)
            .map_err(|e| format!("the slot of {}: {e}", config.bundle.display()))?;
        let name = config.label.unwrap_or_else(|| bundle.name.clone());
        let mut label = [b' '; MAX_LABEL];
        let shown = name.as_bytes();
        let n = shown.len().min(MAX_LABEL);
        label[..n].copy_from_slice(&shown[..n]);
        Ok(Self {
            label,
            client: bundle.name,
            pin: config.pin,
            connections: Connections::new(prototype),
            logged_in: AtomicBool::new(false),
        })
    }

    /// Whether C_Login must come before private objects are used.
    pub(crate) fn needs_login(&self) -> bool {
        self.pin.is_some()
    }

    /// Whether private objects may be used now.
    pub(crate) fn may_use_private(&self) -> bool {
        !self.needs_login() || self.logged_in.load(Ordering::Acquire)
    }

    pub(crate) fn is_logged_in(&self) -> bool {
        self.logged_in.load(Ordering::Acquire)
    }

    /// Checks `pin` against the configured one (in constant time);
    /// `CKR_USER_ALREADY_LOGGED_IN` when logged in already.
    pub(crate) fn check_pin(&self, pin: &[u8]) -> Result<()> {
        if self.is_logged_in() {
            return Err(Rv(CKR_USER_ALREADY_LOGGED_IN));
        }
        if let Some(expected) = &self.pin {
            let expected = expected.as_bytes();
            let same = expected.len() == pin.len()
                && expected.iter().zip(pin).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
            if !same {
                return Err(Rv(CKR_PIN_INCORRECT));
            }
        }
        Ok(())
    }

    pub(crate) fn set_logged_in(&self) {
        self.logged_in.store(true, Ordering::Release);
    }

    pub(crate) fn logout(&self) -> Result<()> {
        if self.logged_in.swap(false, Ordering::AcqRel) {
            Ok(())
        } else {
            Err(Rv(CKR_USER_NOT_LOGGED_IN))
        }
    }
}

impl Module {
    pub(crate) fn slot(&self, id: CK_SLOT_ID) -> Result<&Slot> {
        usize::try_from(id).ok().and_then(|i| self.slots.get(i)).ok_or(Rv(CKR_SLOT_ID_INVALID))
    }

    /// Where `slot`'s KMIP requests go.
    pub(crate) fn remote<'a>(&'a self, slot: &'a Slot) -> Remote<'a> {
        Remote { runtime: &self.runtime, connections: &slot.connections }
    }

    pub(crate) fn open_session(
        &self,
        slot: CK_SLOT_ID,
        flags: CK_FLAGS,
    ) -> Result<CK_SESSION_HANDLE> {
        self.slot(slot)?;
        if flags & CKF_SERIAL_SESSION == 0 {
            return Err(Rv(CKR_SESSION_PARALLEL_NOT_SUPPORTED));
        }
        let mut sessions = self.sessions.write().unwrap_or_else(PoisonError::into_inner);
        if sessions.len() >= MAX_SESSIONS {
            return Err(Rv(CKR_SESSION_COUNT));
        }
        let handle = self.next_session.fetch_add(1, Ordering::Relaxed);
        let session = Session {
            slot,
            flags,
            find: None,
            operations: Operations::default(),
            temporary: Vec::new(),
        };
        sessions.insert(handle, Arc::new(Mutex::new(session)));
        Ok(handle)
    }

    /// Closes a session: the session objects it made are returned, for
    /// the caller to destroy in the key manager.
    pub(crate) fn close_session(
        &self,
        handle: CK_SESSION_HANDLE,
    ) -> Result<(CK_SLOT_ID, Vec<CK_OBJECT_HANDLE>)> {
        let mut sessions = self.sessions.write().unwrap_or_else(PoisonError::into_inner);
        let closed = sessions.remove(&handle).ok_or(Rv(CKR_SESSION_HANDLE_INVALID))?;
        let mut closed = lock(&closed);
        let slot = closed.slot;
        // PKCS#11 3.0 §5.6: closing the last session logs the user out.
        if !sessions.values().any(|s| lock(s).slot == slot) {
            if let Ok(s) = self.slot(slot) {
                let _ = s.logout();
            }
        }
        Ok((slot, std::mem::take(&mut closed.temporary)))
    }

    /// Closes every session of `slot`; returns their session objects.
    pub(crate) fn close_all_sessions(&self, slot: CK_SLOT_ID) -> Result<Vec<CK_OBJECT_HANDLE>> {
        let s = self.slot(slot)?;
        let closed: HashMap<_, _> = {
            let mut sessions = self.sessions.write().unwrap_or_else(PoisonError::into_inner);
            let (closed, kept) =
                sessions.drain().partition(|(_, session)| lock(session).slot == slot);
            *sessions = kept;
            closed
        };
        let _ = s.logout();
        Ok(closed
            .values()
            .flat_map(|session| std::mem::take(&mut lock(session).temporary))
            .collect())
    }

    /// How many sessions are open on `slot`, and how many read/write.
    pub(crate) fn session_counts(&self, slot: CK_SLOT_ID) -> (usize, usize) {
        let sessions = self.sessions.read().unwrap_or_else(PoisonError::into_inner);
        let mine: Vec<CK_FLAGS> = sessions
            .values()
            .map(|s| lock(s))
            .filter(|s| s.slot == slot)
            .map(|s| s.flags)
            .collect();
        (mine.len(), mine.iter().filter(|f| *f & CKF_RW_SESSION != 0).count())
    }

    pub(crate) fn session(&self, handle: CK_SESSION_HANDLE) -> Result<Arc<Mutex<Session>>> {
        self.sessions
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&handle)
            .cloned()
            .ok_or(Rv(CKR_SESSION_HANDLE_INVALID))
    }

    /// The handle of `info` on `slot` (the same one each time the object
    /// is found), its description refreshed.
    pub(crate) fn handle_of(&self, slot: CK_SLOT_ID, info: ObjectInfo) -> Result<CK_OBJECT_HANDLE> {
        let mut handles = lock(&self.handles);
        let key = (slot, info.uid.clone());
        if let Some(&handle) = handles.by_uid.get(&key) {
            let mut info = info;
            // A session object stays one when it is described again.
            info.token = handles.objects.get(&handle).is_none_or(|(_, old)| old.token);
            handles.objects.insert(handle, (slot, Arc::new(info)));
            return Ok(handle);
        }
        if handles.objects.len() >= MAX_HANDLES {
            return Err(Rv(CKR_HOST_MEMORY));
        }
        let handle = handles.next;
        handles.next += 1;
        handles.objects.insert(handle, (slot, Arc::new(info)));
        handles.by_uid.insert(key, handle);
        Ok(handle)
    }

    /// The object behind `handle`, which must be on `slot`.
    pub(crate) fn object(
        &self,
        slot: CK_SLOT_ID,
        handle: CK_OBJECT_HANDLE,
    ) -> Result<Arc<ObjectInfo>> {
        match lock(&self.handles).objects.get(&handle) {
            Some((s, info)) if *s == slot => Ok(Arc::clone(info)),
            _ => Err(Rv(CKR_OBJECT_HANDLE_INVALID)),
        }
    }

    /// Forgets a destroyed object's handle.
    pub(crate) fn forget(&self, handle: CK_OBJECT_HANDLE) {
        let mut handles = lock(&self.handles);
        if let Some((slot, info)) = handles.objects.remove(&handle) {
            handles.by_uid.remove(&(slot, info.uid.clone()));
        }
    }
}
