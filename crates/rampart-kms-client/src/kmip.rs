//! A KMIP client over binary TTLV: one kept-open mutual-TLS connection
//! (TLS 1.2 or 1.3, as asked or as negotiated) to the first of several
//! server addresses that answers, with a [`Bundle`]'s certificate. When the
//! connection breaks (a server stopped or was killed), the request is sent
//! again on a new connection to the next address, so a client configured
//! with every server of a PostgreSQL deployment keeps working while one is
//! down. As with any KMIP client that retries, a non-idempotent request
//! (Create, Register) the dead server had already run before it could
//! answer is run again.
//!
//! Used by `rampart kms bench --kmip`, the failover tests and the
//! PKCS#11 module; the
//! operations it has helpers for are the ones those need (Create + Activate
//! of AES keys, Get, AES-GCM Encrypt, Create Key Pair, Sign, Register and
//! Get of a certificate); [`KmipClient::call`] sends any batch.

use std::sync::Arc;
use std::time::Duration;

use rampart_kmip::enums::{
    usage_mask, BlockCipherMode, CertificateType, CryptographicAlgorithm,
    DigitalSignatureAlgorithm, HashingAlgorithm, ObjectType, Operation, PaddingMethod,
    ResultStatus,
};
use rampart_kmip::message::{
    Attribute, ProtocolVersion, RequestMessage, ResponseBatchItem, ResponseMessage,
};
use rampart_kmip::object_parts::Certificate;
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Fields, Item, Value};
use rustls::pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::bundle::{Bundle, Endpoint};
use crate::error::ConfigError;

/// Largest response accepted (a Get of a key, a Locate page).
const MAX_RESPONSE: usize = 1 << 20;

/// What went wrong talking KMIP.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KmipClientError {
    /// The bundle, an address or the TLS set-up is unusable.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// No address could be reached, or every connection broke.
    #[error("no KMIP server answered: {0}")]
    Unavailable(String),
    /// A server refused this client's certificate in the TLS handshake
    /// (revoked, expired or not from the deployment's CA).
    #[error("the KMIP server refused this client's certificate: {0}")]
    IdentityRefused(String),
    /// A server sent bytes that are not a KMIP response.
    #[error("bad KMIP response from {address}: {message}")]
    Protocol { address: String, message: String },
    /// The server answered the operation with a failure.
    #[error("KMIP {operation} failed: {reason} ({message})")]
    Failed { operation: String, reason: String, message: String },
}

impl From<rampart_crypto::CryptoError> for KmipClientError {
    fn from(error: rampart_crypto::CryptoError) -> Self {
        Self::Config(error.into())
    }
}

/// Which TLS versions the client offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsVersions {
    /// TLS 1.3 and 1.2; the server picks (1.3 with Rampart).
    Negotiated,
    Tls12,
    Tls13,
}

/// The key pair Create Key Pair asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyPairKind {
    /// RSA of this many bits (the server makes 2048, 3072 and 4096).
    Rsa(i32),
    /// EC on a NIST curve.
    Ec(EcCurve),
}

/// The NIST curves of [`KeyPairKind::Ec`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EcCurve {
    P256,
    P384,
    P521,
}

impl KeyPairKind {
    /// The Cryptographic Algorithm and Length of the request (the server
    /// names an EC curve by its length).
    fn algorithm_and_length(self) -> (CryptographicAlgorithm, i32) {
        match self {
            Self::Rsa(bits) => (CryptographicAlgorithm::RSA, bits),
            Self::Ec(EcCurve::P256) => (CryptographicAlgorithm::EC, 256),
            Self::Ec(EcCurve::P384) => (CryptographicAlgorithm::EC, 384),
            Self::Ec(EcCurve::P521) => (CryptographicAlgorithm::EC, 521),
        }
    }
}

/// The two Unique Identifiers of a new key pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPairIds {
    pub private_key: String,
    pub public_key: String,
}

/// The signature Sign asks for, all over SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignatureAlgorithm {
    /// RSASSA-PSS, MGF1 with SHA-256, the server's default salt length.
    RsaPssSha256,
    /// RSASSA-PKCS1-v1_5.
    RsaPkcs1v15Sha256,
    /// ECDSA (a DER signature).
    EcdsaSha256,
}

impl SignatureAlgorithm {
    /// The request's Cryptographic Parameters.
    fn parameters(self) -> Vec<Item> {
        let sha256 = Item::enumeration(Tag::HASHING_ALGORITHM, HashingAlgorithm::SHA256.0);
        match self {
            Self::RsaPssSha256 => vec![
                Item::enumeration(Tag::PADDING_METHOD, PaddingMethod::PSS.0),
                sha256,
                Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, CryptographicAlgorithm::RSA.0),
            ],
            Self::RsaPkcs1v15Sha256 => vec![
                Item::enumeration(Tag::PADDING_METHOD, PaddingMethod::PKCS1_V1_5.0),
                sha256,
                Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, CryptographicAlgorithm::RSA.0),
            ],
            Self::EcdsaSha256 => vec![
                sha256,
                Item::enumeration(Tag::CRYPTOGRAPHIC_ALGORITHM, CryptographicAlgorithm::ECDSA.0),
                Item::enumeration(
                    Tag::DIGITAL_SIGNATURE_ALGORITHM,
                    DigitalSignatureAlgorithm::ECDSA_WITH_SHA256.0,
                ),
            ],
        }
    }
}

struct Target {
    address: String,
    endpoint: Endpoint,
    name: ServerName<'static>,
}

/// A KMIP client (see the module documentation). Not shared between
/// tasks: each holds one connection; make one client per concurrent
/// worker.
pub struct KmipClient {
    targets: Arc<Vec<Target>>,
    connector: TlsConnector,
    version: ProtocolVersion,
    timeout: Duration,
    /// The live connection and the index of the target it is to.
    conn: Option<(TlsStream<TcpStream>, usize)>,
    preferred: usize,
}

impl std::fmt::Debug for KmipClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addresses: Vec<&str> = self.targets.iter().map(|t| t.address.as_str()).collect();
        f.debug_struct("KmipClient").field("addresses", &addresses).finish_non_exhaustive()
    }
}

impl Clone for KmipClient {
    /// A client to the same servers with a connection of its own.
    fn clone(&self) -> Self {
        Self {
            targets: Arc::clone(&self.targets),
            connector: self.connector.clone(),
            version: self.version,
            timeout: self.timeout,
            conn: None,
            preferred: self.preferred,
        }
    }
}

impl KmipClient {
    /// A client of `addresses` (`HOST:PORT`, tried in order) with
    /// `bundle`'s certificate and CA, speaking KMIP 1.4.
    pub fn new(
        bundle: &Bundle,
        addresses: &[String],
        tls: TlsVersions,
    ) -> Result<Self, KmipClientError> {
        if addresses.is_empty() {
            return Err(ConfigError::Config("no KMIP server address".into()).into());
        }
        let versions: &[&'static rustls::SupportedProtocolVersion] = match tls {
            TlsVersions::Negotiated => &[&rustls::version::TLS13, &rustls::version::TLS12],
            TlsVersions::Tls12 => &[&rustls::version::TLS12],
            TlsVersions::Tls13 => &[&rustls::version::TLS13],
        };
        let config = crate::transport::client_tls(
            bundle,
            crate::transport::kmip_crypto_provider(),
            versions,
        )?;
        let mut targets = Vec::new();
        for address in addresses {
            let endpoint = Endpoint::parse(address).map_err(KmipClientError::Config)?;
            let name = ServerName::try_from(endpoint.host.clone())
                .map_err(|e| ConfigError::Config(format!("KMIP address '{address}': {e}")))?;
            targets.push(Target { address: address.clone(), endpoint, name });
        }
        Ok(Self {
            targets: Arc::new(targets),
            connector: TlsConnector::from(Arc::new(config)),
            version: ProtocolVersion::V1_4,
            timeout: Duration::from_secs(10),
            conn: None,
            preferred: 0,
        })
    }

    /// The address of the live connection, if any.
    #[must_use]
    pub fn connected_to(&self) -> Option<&str> {
        self.conn.as_ref().map(|(_, i)| self.targets[*i].address.as_str())
    }

    /// The TLS version of the live connection (`TLSv1_3`...), if any.
    #[must_use]
    pub fn tls_version(&self) -> Option<String> {
        let (tls, _) = self.conn.as_ref()?;
        tls.get_ref().1.protocol_version().map(|v| format!("{v:?}"))
    }

    async fn connect(&self, index: usize) -> Result<TlsStream<TcpStream>, Failure> {
        let target = &self.targets[index];
        let address = (target.endpoint.host.as_str(), target.endpoint.port);
        let work = async {
            let tcp = TcpStream::connect(address).await.map_err(Failure::from)?;
            let _ = tcp.set_nodelay(true);
            self.connector.connect(target.name.clone(), tcp).await.map_err(Failure::from)
        };
        match tokio::time::timeout(self.timeout, work).await {
            Ok(result) => result.map_err(|f| f.at(&target.address)),
            Err(_) => Err(Failure::new(format!("{}: connection timed out", target.address))),
        }
    }

    async fn exchange(
        tls: &mut TlsStream<TcpStream>,
        request: &[u8],
        timeout: Duration,
    ) -> Result<Vec<u8>, Failure> {
        let work = async {
            tls.write_all(request).await.map_err(Failure::from)?;
            let mut header = [0u8; ttlv::HEADER_LEN];
            tls.read_exact(&mut header).await.map_err(Failure::from)?;
            let limits = rampart_kmip::Limits {
                max_message_len: MAX_RESPONSE,
                ..rampart_kmip::Limits::default()
            };
            let len =
                ttlv::message_len(&header, &limits).map_err(|e| Failure::new(e.to_string()))?;
            let mut message = vec![0u8; len];
            message[..ttlv::HEADER_LEN].copy_from_slice(&header);
            tls.read_exact(&mut message[ttlv::HEADER_LEN..]).await.map_err(Failure::from)?;
            Ok(message)
        };
        match tokio::time::timeout(timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(Failure::new("no response in time".into())),
        }
    }

    /// Sends one request of these batch items and returns the response's
    /// batch items (failed ones included). On a broken connection the
    /// request goes to the next address, each address once.
    pub async fn call(
        &mut self,
        operations: Vec<(Operation, Vec<Item>)>,
    ) -> Result<Vec<ResponseBatchItem>, KmipClientError> {
        let request = RequestMessage::new(self.version, operations)
            .to_item()
            .encode()
            .map_err(|e| ConfigError::Config(format!("cannot encode the request: {e}")))?;
        let n = self.targets.len();
        let mut failures = Vec::new();
        if let Some((mut tls, index)) = self.conn.take() {
            match Self::exchange(&mut tls, &request, self.timeout).await {
                Ok(bytes) => return self.answer(tls, index, &bytes),
                // A kept connection may just have been closed by the
                // server's idle timeout: its address is tried again first.
                Err(failure) => failures.push(failure.at(&self.targets[index].address)),
            }
        }
        for offset in 0..n {
            let index = (self.preferred + offset) % n;
            let mut tls = match self.connect(index).await {
                Ok(tls) => tls,
                Err(failure) => {
                    failures.push(failure);
                    continue;
                }
            };
            match Self::exchange(&mut tls, &request, self.timeout).await {
                Ok(bytes) => return self.answer(tls, index, &bytes),
                Err(failure) => failures.push(failure.at(&self.targets[index].address)),
            }
        }
        let refused = failures.iter().any(|f| f.refused);
        let message = failures.into_iter().map(|f| f.message).collect::<Vec<_>>().join("; ");
        Err(if refused {
            KmipClientError::IdentityRefused(message)
        } else {
            KmipClientError::Unavailable(message)
        })
    }

    /// Parses a response read on `tls` (from target `index`), which is
    /// kept for the next request.
    fn answer(
        &mut self,
        tls: TlsStream<TcpStream>,
        index: usize,
        bytes: &[u8],
    ) -> Result<Vec<ResponseBatchItem>, KmipClientError> {
        let bad = |message: String| KmipClientError::Protocol {
            address: self.targets[index].address.clone(),
            message,
        };
        let limits = rampart_kmip::Limits {
            max_message_len: MAX_RESPONSE,
            ..rampart_kmip::Limits::default()
        };
        let item = ttlv::decode(bytes, &limits).map_err(|e| bad(e.to_string()))?;
        let response = ResponseMessage::parse(&item).map_err(|e| bad(e.to_string()))?;
        self.preferred = index;
        self.conn = Some((tls, index));
        Ok(response.batch_items)
    }

    /// Sends one operation; its payload's fields on success.
    pub async fn one(
        &mut self,
        operation: Operation,
        fields: Vec<Item>,
    ) -> Result<Vec<Item>, KmipClientError> {
        let mut items = self.call(vec![(operation, fields)]).await?;
        let item = items.pop().ok_or_else(|| KmipClientError::Protocol {
            address: self.connected_to().unwrap_or_default().to_owned(),
            message: "a response without batch items".into(),
        })?;
        payload_of(operation, item)
    }

    /// Creates an AES key of `bits` named `name` (when given) and activates
    /// it, in one batch; returns its Unique Identifier.
    pub async fn create_aes(
        &mut self,
        bits: i32,
        name: Option<&str>,
    ) -> Result<String, KmipClientError> {
        let mut attributes = vec![
            Attribute::new(
                "Cryptographic Algorithm",
                Value::Enumeration(CryptographicAlgorithm::AES.0),
            )
            .to_item(),
            Attribute::new("Cryptographic Length", Value::Integer(bits)).to_item(),
            // Encrypt | Decrypt.
            Attribute::new("Cryptographic Usage Mask", Value::Integer(0x4 | 0x8)).to_item(),
        ];
        if let Some(name) = name {
            attributes.push(name_attribute(name));
        }
        let mut items = self
            .call(vec![
                (
                    Operation::CREATE,
                    vec![
                        Item::enumeration(Tag::OBJECT_TYPE, ObjectType::SYMMETRIC_KEY.0),
                        Item::structure(Tag::TEMPLATE_ATTRIBUTE, attributes),
                    ],
                ),
                (Operation::ACTIVATE, Vec::new()),
            ])
            .await?;
        if items.len() != 2 {
            return Err(KmipClientError::Protocol {
                address: self.connected_to().unwrap_or_default().to_owned(),
                message: format!("{} batch items for 2 requested", items.len()),
            });
        }
        let activated = items.pop().map(|i| payload_of(Operation::ACTIVATE, i));
        let created = payload_of(Operation::CREATE, items.remove(0))?;
        activated.transpose()?;
        unique_identifier(&created)
    }

    /// Get: the object's payload fields (Object Type, Unique Identifier,
    /// the object).
    pub async fn get(&mut self, uid: &str) -> Result<Vec<Item>, KmipClientError> {
        self.one(Operation::GET, vec![Item::text(Tag::UNIQUE_IDENTIFIER, uid)]).await
    }

    /// Get of a symmetric key in Raw format: its key material.
    pub async fn get_symmetric_key(
        &mut self,
        uid: &str,
    ) -> Result<rampart_crypto::SecretBytes, KmipClientError> {
        let fields = self.get(uid).await?;
        let material = fields
            .iter()
            .find(|i| i.tag == Tag::SYMMETRIC_KEY)
            .ok_or_else(|| "Get answered no Symmetric Key".to_owned())
            .and_then(|object| {
                let raw = || -> Result<Vec<u8>, rampart_kmip::KmipError> {
                    let key = Fields::of(object)?;
                    let block = Fields::of(key.required(Tag::KEY_BLOCK)?)?;
                    let value = Fields::of(block.required(Tag::KEY_VALUE)?)?;
                    Ok(value.required(Tag::KEY_MATERIAL)?.as_bytes()?.to_vec())
                };
                raw().map_err(|e| format!("not a Raw symmetric key: {e}"))
            });
        material.map(rampart_crypto::SecretBytes::new).map_err(|e| self.bad(e))
    }

    /// Locate by Name: the Unique Identifiers found.
    pub async fn locate_name(&mut self, name: &str) -> Result<Vec<String>, KmipClientError> {
        let fields = self.one(Operation::LOCATE, vec![name_attribute(name)]).await?;
        fields
            .iter()
            .filter(|i| i.tag == Tag::UNIQUE_IDENTIFIER)
            .map(|i| i.as_text().map(str::to_owned).map_err(|e| self.bad(e.to_string())))
            .collect()
    }

    /// AES-GCM Encrypt of `data` (the server picks the 96-bit IV):
    /// (ciphertext, IV, 128-bit tag).
    pub async fn encrypt_gcm(
        &mut self,
        uid: &str,
        data: &[u8],
    ) -> Result<(Vec<u8>, Vec<u8>, Vec<u8>), KmipClientError> {
        let fields = self
            .one(
                Operation::ENCRYPT,
                vec![
                    Item::text(Tag::UNIQUE_IDENTIFIER, uid),
                    Item::structure(
                        Tag::CRYPTOGRAPHIC_PARAMETERS,
                        vec![Item::enumeration(Tag::BLOCK_CIPHER_MODE, BlockCipherMode::GCM.0)],
                    ),
                    Item::bytes(Tag::DATA, data),
                ],
            )
            .await?;
        let get = |tag: Tag| -> Result<Vec<u8>, KmipClientError> {
            fields
                .iter()
                .find(|i| i.tag == tag)
                .ok_or_else(|| self.bad(format!("Encrypt answered without {tag}")))?
                .as_bytes()
                .map(<[u8]>::to_vec)
                .map_err(|e| self.bad(e.to_string()))
        };
        Ok((get(Tag::DATA)?, get(Tag::IV_COUNTER_NONCE)?, get(Tag::AUTHENTICATED_ENCRYPTION_TAG)?))
    }

    /// Create Key Pair of `kind`, each key named when `names` (private,
    /// public) are given; with `activate`, both keys are then activated
    /// (the private key in the same batch, by the ID Placeholder).
    pub async fn create_key_pair(
        &mut self,
        kind: KeyPairKind,
        names: Option<(&str, &str)>,
        activate: bool,
    ) -> Result<KeyPairIds, KmipClientError> {
        let (algorithm, length) = kind.algorithm_and_length();
        let common = vec![
            Attribute::new("Cryptographic Algorithm", Value::Enumeration(algorithm.0)).to_item(),
            Attribute::new("Cryptographic Length", Value::Integer(length)).to_item(),
        ];
        let own = |mask: i32, name: Option<&str>| {
            let mut attributes =
                vec![Attribute::new("Cryptographic Usage Mask", Value::Integer(mask)).to_item()];
            if let Some(name) = name {
                attributes.push(name_attribute(name));
            }
            attributes
        };
        let mut batch = vec![(
            Operation::CREATE_KEY_PAIR,
            vec![
                Item::structure(Tag::COMMON_TEMPLATE_ATTRIBUTE, common),
                Item::structure(
                    Tag::PRIVATE_KEY_TEMPLATE_ATTRIBUTE,
                    own(usage_mask::SIGN, names.map(|n| n.0)),
                ),
                Item::structure(
                    Tag::PUBLIC_KEY_TEMPLATE_ATTRIBUTE,
                    own(usage_mask::VERIFY, names.map(|n| n.1)),
                ),
            ],
        )];
        if activate {
            batch.push((Operation::ACTIVATE, Vec::new()));
        }
        let expected = batch.len();
        let mut items = self.call(batch).await?;
        if items.len() != expected {
            return Err(self.bad(format!("{} batch items for {expected} requested", items.len())));
        }
        let activated = if activate { items.pop() } else { None };
        let created = payload_of(Operation::CREATE_KEY_PAIR, items.remove(0))?;
        activated.map(|i| payload_of(Operation::ACTIVATE, i)).transpose()?;
        let text = |tag: Tag| -> Result<String, KmipClientError> {
            created
                .iter()
                .find(|i| i.tag == tag)
                .ok_or_else(|| self.bad(format!("Create Key Pair answered without {tag}")))?
                .as_text()
                .map(str::to_owned)
                .map_err(|e| self.bad(e.to_string()))
        };
        let ids = KeyPairIds {
            private_key: text(Tag::PRIVATE_KEY_UNIQUE_IDENTIFIER)?,
            public_key: text(Tag::PUBLIC_KEY_UNIQUE_IDENTIFIER)?,
        };
        if activate {
            self.one(
                Operation::ACTIVATE,
                vec![Item::text(Tag::UNIQUE_IDENTIFIER, &ids.public_key)],
            )
            .await?;
        }
        Ok(ids)
    }

    /// Sign of `data` (the whole message; the server hashes it) by the
    /// private key `uid`: the signature.
    pub async fn sign(
        &mut self,
        uid: &str,
        algorithm: SignatureAlgorithm,
        data: &[u8],
    ) -> Result<Vec<u8>, KmipClientError> {
        let fields = self
            .one(
                Operation::SIGN,
                vec![
                    Item::text(Tag::UNIQUE_IDENTIFIER, uid),
                    Item::structure(Tag::CRYPTOGRAPHIC_PARAMETERS, algorithm.parameters()),
                    Item::bytes(Tag::DATA, data),
                ],
            )
            .await?;
        let signature = fields
            .iter()
            .find(|i| i.tag == Tag::SIGNATURE_DATA)
            .ok_or_else(|| self.bad("Sign answered without Signature Data".into()))?
            .as_bytes()
            .map_err(|e| self.bad(e.to_string()))?;
        if signature.is_empty() {
            return Err(self.bad("Sign answered an empty signature".into()));
        }
        Ok(signature.to_vec())
    }

    /// Register of an X.509 certificate (its DER), named `name` when
    /// given: its Unique Identifier.
    pub async fn register_certificate(
        &mut self,
        der: &[u8],
        name: Option<&str>,
    ) -> Result<String, KmipClientError> {
        let certificate =
            Certificate { certificate_type: CertificateType::X509, value: der.into() };
        let attributes = name.map(name_attribute).into_iter().collect();
        let fields = self
            .one(
                Operation::REGISTER,
                vec![
                    Item::enumeration(Tag::OBJECT_TYPE, ObjectType::CERTIFICATE.0),
                    Item::structure(Tag::TEMPLATE_ATTRIBUTE, attributes),
                    certificate.to_item(),
                ],
            )
            .await?;
        unique_identifier(&fields)
    }

    /// Get of a certificate: its type and value.
    pub async fn get_certificate(&mut self, uid: &str) -> Result<Certificate, KmipClientError> {
        let fields = self.get(uid).await?;
        let object = fields
            .iter()
            .find(|i| i.tag == Tag::CERTIFICATE)
            .ok_or_else(|| self.bad("Get answered no Certificate".into()))?;
        Certificate::parse(object).map_err(|e| self.bad(format!("the Certificate: {e}")))
    }

    fn bad(&self, message: String) -> KmipClientError {
        KmipClientError::Protocol {
            address: self.connected_to().unwrap_or_default().to_owned(),
            message,
        }
    }
}

/// Why one address did not answer, and whether its server refused the
/// client's certificate.
struct Failure {
    message: String,
    refused: bool,
}

impl Failure {
    fn new(message: String) -> Self {
        Self { message, refused: false }
    }

    /// The same failure, naming the address it happened at.
    fn at(self, address: &str) -> Self {
        Self { message: format!("{address}: {}", self.message), ..self }
    }
}

impl From<std::io::Error> for Failure {
    fn from(error: std::io::Error) -> Self {
        use rustls::AlertDescription as A;
        // The server's verdict on the client certificate arrives as a TLS
        // alert, during the handshake (TLS 1.2) or at the first read
        // after it (TLS 1.3).
        let refused = matches!(
            error.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()),
            Some(rustls::Error::AlertReceived(
                A::CertificateRevoked
                    | A::CertificateExpired
                    | A::BadCertificate
                    | A::UnknownCA
                    | A::CertificateUnknown
                    | A::AccessDenied
                    | A::CertificateRequired
            ))
        );
        Self { message: error.to_string(), refused }
    }
}

/// A Name attribute of type Uninterpreted Text String.
fn name_attribute(name: &str) -> Item {
    Attribute::new(
        "Name",
        Value::Structure(vec![
            Item::text(Tag::NAME_VALUE, name),
            Item::enumeration(Tag::NAME_TYPE, 1),
        ]),
    )
    .to_item()
}

/// The payload fields of a successful batch item; its Result Reason and
/// Message otherwise.
fn payload_of(operation: Operation, item: ResponseBatchItem) -> Result<Vec<Item>, KmipClientError> {
    if item.result_status != ResultStatus::SUCCESS {
        return Err(KmipClientError::Failed {
            operation: format!("{operation:?}"),
            reason: item.result_reason.map_or_else(|| "no reason".into(), |r| format!("{r:?}")),
            message: item.result_message.unwrap_or_default(),
        });
    }
    match item.payload {
        Some(payload) => Ok(payload.children().map(<[Item]>::to_vec).unwrap_or_default()),
        None => Ok(Vec::new()),
    }
}

fn unique_identifier(fields: &[Item]) -> Result<String, KmipClientError> {
    Fields::of(&Item::structure(Tag::RESPONSE_PAYLOAD, fields.to_vec()))
        .and_then(|f| {
            f.required(Tag::UNIQUE_IDENTIFIER).and_then(|i| i.as_text().map(str::to_owned))
        })
        .map_err(|e| KmipClientError::Protocol {
            address: String::new(),
            message: format!("no Unique Identifier: {e}"),
        })
}
