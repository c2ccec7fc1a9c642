//! KMIP managed objects over the key manager's own model: a KMIP object is
//! one version of a key-manager key, its Unique Identifier `NAME/VERSION`.
//! Create and Register make ordinary keys (listed by `rampart kms key
//! list`, allowed to the creating client with `client:NAME`, exportable);
//! Re-key adds a version, linked to the one it replaces by Replaced and
//! Replacement Object Links (Re-key Key Pair adds one to each half of a
//! pair, Re-certify one to a certificate's key; Certify makes a
//! certificate signed by the deployment CA); Revoke and Destroy change
//! the version's state in the same store the REST API reads. What KMIP
//! adds to a version (object type, algorithm, length, usage mask, owner,
//! Activation and Deactivation Dates, compromise) lives in
//! `kms_kmip_objects`; the
//! attributes a client sets (Name, Object Group, custom `x-` attributes,
//! which KMIP 2.x calls Vendor Attributes...) live per object (key
//! version) in `kms_kmip_version_attributes`, whose values are indexed for
//! Locate. Re-key gives the new object a copy of the old one's and moves
//! the Names to it (KMIP 1.4 §4.4); a version added by a REST rotation
//! shows its predecessor's until a change gives it its own.
//!
//! States follow KMIP 1.4 §3.22: a version whose Activation Date is unset
//! or in the future is Pre-Active, one past its Deactivation Date (or
//! revoked) Deactivated, one revoked for a compromise Compromised, a
//! destroyed one Destroyed. The REST API enforces the same dates (see
//! `service::access::check_kmip_dates`).
//!
//! Access is the REST API's (both call [`crate::server::service::access`]):
//! a client sees (Get Attributes, Locate) the keys whose allow rule
//! matches it, or every key when it is an admin; uses a key (Get, Encrypt,
//! Decrypt, MAC, wrapping) only when the rule matches it; and changes a
//! key's life cycle or attributes when it is an admin or the client that
//! created the key over KMIP.
//!
//! Here: the batch item dispatch. The objects and their states are in
//! `object`, the session (loading, access, material) in `session`, and
//! the operations in `lifecycle`, `attributes` (with `adjust`), `locate`,
//! `get`, `register` (with `templates`, the 1.x Template objects and
//! their use), `key_pair` (Create Key Pair, Re-key Key Pair), `certify`
//! (Certify, Re-certify), `split_keys`, `derive`, `ciphers` (Encrypt,
//! Decrypt, with `usage_limits`) and `streams` (Hash, MAC, MAC Verify,
//! RNG Retrieve and RNG Seed); the public-key ones in `signing` (Sign,
//! Signature Verify)
//! and `rsa_crypt` (RSA Encrypt and Decrypt), over the keys `asym_key`
//! loads and checks.

mod adjust;
mod asym_key;
mod attributes;
mod certificate;
mod certify;
mod ciphers;
mod crypto;
mod derive;
mod errors;
mod get;
mod interop;
mod key_formats;
mod key_pair;
mod lease;
mod lifecycle;
mod locate;
mod object;
mod register;
mod rsa_crypt;
mod server_attributes;
mod session;
mod signing;
mod split_keys;
mod stream_table;
mod streams;
mod templates;
mod undo;
mod usage_limits;

use rampart_kmip::enums::Operation;
use rampart_kmip::message::ProtocolVersion;
use rampart_kmip::payload::{
    parse_rng_retrieve, parse_rng_seed, AdjustAttributeRequest, AttributeChangeRequest,
    CertifyRequest, CreateKeyPairRequest, CreateRequest, CreateSplitKeyRequest, CryptoRequest,
    DeriveKeyRequest, GetRequest, JoinSplitKeyRequest, LocateRequest, ObjectRequest,
    ReKeyKeyPairRequest, ReKeyRequest, RegisterRequest, RevokeRequest, SignRequest, StreamRequest,
};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::Item;
use rampart_kmip::KmipError;

use self::attributes::Change;
use self::crypto::encoding_option;
use self::errors::R;

pub(crate) use self::certificate::derived_from_certificate;
pub(crate) use self::errors::kms as kms_error;
pub(crate) use self::lifecycle::{carried_rows, new_kmip_key, new_kmip_version, NewObject};
pub(crate) use self::object::{decode_value, encode_value, unique_identifier};
pub(crate) use self::register::certificate_object;
pub(crate) use self::server_attributes::single_valued;
pub(crate) use self::session::Session;

/// Whether this server serves `operation` (of [`OPERATIONS`]) to a client
/// speaking `version`, which Query Operations then lists: Log, Interop,
/// Set Attribute and Adjust Attribute are KMIP 2.x operations, Create
/// and Join Split Key KMIP 1.2 ones, and Interop is on only for interop
/// testing.
pub(crate) fn listed(
    state: &crate::server::state::State,
    operation: Operation,
    version: ProtocolVersion,
) -> bool {
    let since_2 = matches!(
        operation,
        Operation::LOG
            | Operation::INTEROP
            | Operation::SET_ATTRIBUTE
            | Operation::ADJUST_ATTRIBUTE
    );
    // Split keys came with KMIP 1.2.
    let since_1_2 = matches!(operation, Operation::CREATE_SPLIT_KEY | Operation::JOIN_SPLIT_KEY);
    OPERATIONS.contains(&operation)
        && (!since_2 || version >= ProtocolVersion::V2_0)
        && (!since_1_2 || version >= ProtocolVersion::V1_2)
        && (operation != Operation::INTEROP || state.kmip_interop)
}
pub(crate) use self::stream_table::Streams;
pub(crate) use self::undo::{undoable, UndoLog};

/// Every operation the KMIP front end serves (what Query Operations
/// lists): Discover Versions and Query, answered by `server::kmip`, and
/// those [`Session::run`] dispatches, which refuses any other.
pub const OPERATIONS: &[Operation] = &[
    Operation::DISCOVER_VERSIONS,
    Operation::QUERY,
    Operation::CREATE,
    Operation::CREATE_KEY_PAIR,
    Operation::REGISTER,
    Operation::RE_KEY,
    Operation::RE_KEY_KEY_PAIR,
    Operation::CERTIFY,
    Operation::RE_CERTIFY,
    Operation::DERIVE_KEY,
    Operation::CREATE_SPLIT_KEY,
    Operation::JOIN_SPLIT_KEY,
    Operation::LOCATE,
    Operation::CHECK,
    Operation::GET,
    Operation::GET_ATTRIBUTES,
    Operation::GET_ATTRIBUTE_LIST,
    Operation::ADD_ATTRIBUTE,
    Operation::MODIFY_ATTRIBUTE,
    Operation::DELETE_ATTRIBUTE,
    Operation::SET_ATTRIBUTE,
    Operation::ADJUST_ATTRIBUTE,
    Operation::ACTIVATE,
    Operation::REVOKE,
    Operation::DESTROY,
    Operation::OBTAIN_LEASE,
    Operation::ENCRYPT,
    Operation::DECRYPT,
    Operation::SIGN,
    Operation::SIGNATURE_VERIFY,
    Operation::MAC,
    Operation::MAC_VERIFY,
    Operation::HASH,
    Operation::RNG_RETRIEVE,
    Operation::RNG_SEED,
    Operation::LOG,
    Operation::INTEROP,
];

impl Session<'_> {
    /// Runs one batch item.
    pub(crate) async fn run(&mut self, operation: Operation, payload: &Item) -> R<Vec<Item>> {
        if !listed(self.state, operation, self.version) {
            return Err(KmipError::OperationNotSupported(operation));
        }
        let result = match operation {
            Operation::CREATE => self.create(&CreateRequest::parse(payload)?).await,
            Operation::REGISTER => {
                templates::refuse_in_2x(payload, self.version)?;
                self.register(RegisterRequest::parse(payload)?).await
            }
            Operation::CREATE_KEY_PAIR => {
                self.create_key_pair(&CreateKeyPairRequest::parse(payload)?).await
            }
            Operation::GET => {
                let encoding = encoding_option(payload)?;
                self.get(&GetRequest::parse(payload)?, encoding).await
            }
            Operation::GET_ATTRIBUTES => self.get_attributes(&ObjectRequest::parse(payload)?).await,
            Operation::GET_ATTRIBUTE_LIST => {
                self.get_attribute_list(&ObjectRequest::parse(payload)?).await
            }
            Operation::ADD_ATTRIBUTE => {
                self.change_attribute(Change::Add, &AttributeChangeRequest::parse(payload)?).await
            }
            Operation::MODIFY_ATTRIBUTE => {
                self.change_attribute(Change::Modify, &AttributeChangeRequest::parse(payload)?)
                    .await
            }
            Operation::DELETE_ATTRIBUTE => {
                self.change_attribute(Change::Delete, &AttributeChangeRequest::parse(payload)?)
                    .await
            }
            Operation::SET_ATTRIBUTE => {
                self.set_attribute(&AttributeChangeRequest::parse(payload)?).await
            }
            Operation::ADJUST_ATTRIBUTE => {
                self.adjust_attribute(&AdjustAttributeRequest::parse(payload)?).await
            }
            Operation::CREATE_SPLIT_KEY => {
                self.create_split_key(&CreateSplitKeyRequest::parse(payload)?).await
            }
            Operation::JOIN_SPLIT_KEY => {
                self.join_split_key(&JoinSplitKeyRequest::parse(payload)?).await
            }
            Operation::LOCATE => self.locate(&LocateRequest::parse(payload)?).await,
            Operation::ACTIVATE => self.activate(&ObjectRequest::parse(payload)?).await,
            Operation::REVOKE => self.revoke(&RevokeRequest::parse(payload)?).await,
            Operation::DESTROY => self.destroy(&ObjectRequest::parse(payload)?).await,
            Operation::RE_KEY => self.rekey(&ReKeyRequest::parse(payload)?).await,
            Operation::RE_KEY_KEY_PAIR => {
                self.rekey_key_pair(&ReKeyKeyPairRequest::parse(payload)?).await
            }
            Operation::CERTIFY => self.certify(&CertifyRequest::parse(payload)?).await,
            Operation::RE_CERTIFY => self.recertify(&CertifyRequest::parse(payload)?).await,
            Operation::DERIVE_KEY => self.derive_key(&DeriveKeyRequest::parse(payload)?).await,
            Operation::CHECK => self.check(payload).await,
            Operation::ENCRYPT => self.encrypt(&CryptoRequest::parse(payload)?, true).await,
            Operation::DECRYPT => self.encrypt(&CryptoRequest::parse(payload)?, false).await,
            Operation::MAC => self.mac(&StreamRequest::parse(payload)?, false).await,
            Operation::MAC_VERIFY => self.mac(&StreamRequest::parse(payload)?, true).await,
            Operation::SIGN => self.sign(&SignRequest::parse(payload)?).await,
            Operation::SIGNATURE_VERIFY => {
                self.signature_verify(&SignRequest::parse(payload)?).await
            }
            Operation::HASH => self.hash(&StreamRequest::parse(payload)?).await,
            Operation::RNG_RETRIEVE => self.rng_retrieve(parse_rng_retrieve(payload)?),
            Operation::RNG_SEED => self.rng_seed(&parse_rng_seed(payload)?),
            Operation::OBTAIN_LEASE => self.obtain_lease(&ObjectRequest::parse(payload)?).await,
            Operation::LOG => self.log(payload),
            Operation::INTEROP => self.interop(payload),
            other => Err(KmipError::OperationNotSupported(other)),
        }?;
        // The object named by a successful item is the next one's ID
        // Placeholder.
        if let Some(uid) = result.iter().find(|i| i.tag == Tag::UNIQUE_IDENTIFIER) {
            if let Ok(uid) = uid.as_text() {
                self.placeholder = Some(uid.to_owned());
            }
        }
        Ok(result)
    }
}
