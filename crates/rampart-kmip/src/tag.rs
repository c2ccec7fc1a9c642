//! Tags of the KMIP items Rampart reads or writes (KMIP 1.4 §9.1.3.1,
//! KMIP 2.1 §11). A tag outside this list is kept as a number: items with
//! unknown tags still decode, and their operation or attribute is refused
//! with a Result Reason, not a dropped connection.

/// A 3-byte KMIP tag (0x420000–0x42FFFF for the standard ones, 0x540000–0x54FFFF for
/// extensions), held in the low 24 bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tag(pub u32);

impl Tag {
    /// Activation Date.
    pub const ACTIVATION_DATE: Self = Self(0x420001);
    /// Application Data.
    pub const APPLICATION_DATA: Self = Self(0x420002);
    /// Application Namespace.
    pub const APPLICATION_NAMESPACE: Self = Self(0x420003);
    /// Application Specific Information.
    pub const APPLICATION_SPECIFIC_INFORMATION: Self = Self(0x420004);
    /// Archive Date.
    pub const ARCHIVE_DATE: Self = Self(0x420005);
    /// Asynchronous Correlation Value.
    pub const ASYNCHRONOUS_CORRELATION_VALUE: Self = Self(0x420006);
    /// Asynchronous Indicator.
    pub const ASYNCHRONOUS_INDICATOR: Self = Self(0x420007);
    /// Attribute.
    pub const ATTRIBUTE: Self = Self(0x420008);
    /// Attribute Index.
    pub const ATTRIBUTE_INDEX: Self = Self(0x420009);
    /// Attribute Name.
    pub const ATTRIBUTE_NAME: Self = Self(0x42000A);
    /// Attribute Value.
    pub const ATTRIBUTE_VALUE: Self = Self(0x42000B);
    /// Authentication.
    pub const AUTHENTICATION: Self = Self(0x42000C);
    /// Batch Count.
    pub const BATCH_COUNT: Self = Self(0x42000D);
    /// Batch Error Continuation Option.
    pub const BATCH_ERROR_CONTINUATION_OPTION: Self = Self(0x42000E);
    /// Batch Item.
    pub const BATCH_ITEM: Self = Self(0x42000F);
    /// Batch Order Option.
    pub const BATCH_ORDER_OPTION: Self = Self(0x420010);
    /// Block Cipher Mode.
    pub const BLOCK_CIPHER_MODE: Self = Self(0x420011);
    /// Compromise Date.
    pub const COMPROMISE_DATE: Self = Self(0x420020);
    /// Compromise Occurrence Date.
    pub const COMPROMISE_OCCURRENCE_DATE: Self = Self(0x420021);
    /// Contact Information.
    pub const CONTACT_INFORMATION: Self = Self(0x420022);
    /// Credential.
    pub const CREDENTIAL: Self = Self(0x420023);
    /// Credential Type.
    pub const CREDENTIAL_TYPE: Self = Self(0x420024);
    /// Credential Value.
    pub const CREDENTIAL_VALUE: Self = Self(0x420025);
    /// Cryptographic Algorithm.
    pub const CRYPTOGRAPHIC_ALGORITHM: Self = Self(0x420028);
    /// Cryptographic Length.
    pub const CRYPTOGRAPHIC_LENGTH: Self = Self(0x42002A);
    /// Cryptographic Parameters.
    pub const CRYPTOGRAPHIC_PARAMETERS: Self = Self(0x42002B);
    /// Cryptographic Usage Mask.
    pub const CRYPTOGRAPHIC_USAGE_MASK: Self = Self(0x42002C);
    /// Deactivation Date.
    pub const DEACTIVATION_DATE: Self = Self(0x42002F);
    /// Destroy Date.
    pub const DESTROY_DATE: Self = Self(0x420033);
    /// Digest.
    pub const DIGEST: Self = Self(0x420034);
    /// Encryption Key Information.
    pub const ENCRYPTION_KEY_INFORMATION: Self = Self(0x420036);
    /// Hashing Algorithm.
    pub const HASHING_ALGORITHM: Self = Self(0x420038);
    /// Initial Date.
    pub const INITIAL_DATE: Self = Self(0x420039);
    /// Initialization Vector.
    pub const INITIALIZATION_VECTOR: Self = Self(0x42003A);
    pub const DERIVATION_DATA: Self = Self(0x420030);
    pub const DERIVATION_METHOD: Self = Self(0x420031);
    pub const DERIVATION_PARAMETERS: Self = Self(0x420032);
    pub const ITERATION_COUNT: Self = Self(0x42003C);
    pub const SALT: Self = Self(0x420084);
    /// IV/Counter/Nonce.
    pub const IV_COUNTER_NONCE: Self = Self(0x42003D);
    /// Key (inside a Transparent Symmetric Key).
    pub const KEY: Self = Self(0x42003F);
    /// Key Block.
    pub const KEY_BLOCK: Self = Self(0x420040);
    /// Key Compression Type.
    pub const KEY_COMPRESSION_TYPE: Self = Self(0x420041);
    /// Key Format Type.
    pub const KEY_FORMAT_TYPE: Self = Self(0x420042);
    /// Key Material.
    pub const KEY_MATERIAL: Self = Self(0x420043);
    /// Key Value.
    pub const KEY_VALUE: Self = Self(0x420045);
    /// Key Wrapping Data.
    pub const KEY_WRAPPING_DATA: Self = Self(0x420046);
    /// Key Wrapping Specification.
    pub const KEY_WRAPPING_SPECIFICATION: Self = Self(0x420047);
    /// Last Change Date.
    pub const LAST_CHANGE_DATE: Self = Self(0x420048);
    /// Lease Time.
    pub const LEASE_TIME: Self = Self(0x420049);
    /// Link.
    pub const LINK: Self = Self(0x42004A);
    /// Link Type.
    pub const LINK_TYPE: Self = Self(0x42004B);
    /// Linked Object Identifier.
    pub const LINKED_OBJECT_IDENTIFIER: Self = Self(0x42004C);
    /// MAC/Signature.
    pub const MAC_SIGNATURE: Self = Self(0x42004D);
    /// MAC/Signature Key Information.
    pub const MAC_SIGNATURE_KEY_INFORMATION: Self = Self(0x42004E);
    /// Maximum Items.
    pub const MAXIMUM_ITEMS: Self = Self(0x42004F);
    /// Maximum Response Size.
    pub const MAXIMUM_RESPONSE_SIZE: Self = Self(0x420050);
    /// Message Extension.
    pub const MESSAGE_EXTENSION: Self = Self(0x420051);
    /// Name.
    pub const NAME: Self = Self(0x420053);
    /// Name Type.
    pub const NAME_TYPE: Self = Self(0x420054);
    /// Name Value.
    pub const NAME_VALUE: Self = Self(0x420055);
    /// Object Group.
    pub const OBJECT_GROUP: Self = Self(0x420056);
    /// Object Type.
    pub const OBJECT_TYPE: Self = Self(0x420057);
    /// Offset.
    pub const OFFSET: Self = Self(0x420058);
    /// Operation.
    pub const OPERATION: Self = Self(0x42005C);
    /// Operation Policy Name.
    pub const OPERATION_POLICY_NAME: Self = Self(0x42005D);
    /// Padding Method.
    pub const PADDING_METHOD: Self = Self(0x42005F);
    /// Process Start Date.
    pub const PROCESS_START_DATE: Self = Self(0x420067);
    /// Protect Stop Date.
    pub const PROTECT_STOP_DATE: Self = Self(0x420068);
    /// Protocol Version.
    pub const PROTOCOL_VERSION: Self = Self(0x420069);
    /// Protocol Version Major.
    pub const PROTOCOL_VERSION_MAJOR: Self = Self(0x42006A);
    /// Protocol Version Minor.
    pub const PROTOCOL_VERSION_MINOR: Self = Self(0x42006B);
    /// Query Function.
    pub const QUERY_FUNCTION: Self = Self(0x420074);
    /// Replaced Unique Identifier.
    pub const REPLACED_UNIQUE_IDENTIFIER: Self = Self(0x420076);
    /// Request Header.
    pub const REQUEST_HEADER: Self = Self(0x420077);
    /// Request Message.
    pub const REQUEST_MESSAGE: Self = Self(0x420078);
    /// Request Payload.
    pub const REQUEST_PAYLOAD: Self = Self(0x420079);
    /// Response Header.
    pub const RESPONSE_HEADER: Self = Self(0x42007A);
    /// Response Message.
    pub const RESPONSE_MESSAGE: Self = Self(0x42007B);
    /// Response Payload.
    pub const RESPONSE_PAYLOAD: Self = Self(0x42007C);
    /// Result Message.
    pub const RESULT_MESSAGE: Self = Self(0x42007D);
    /// Result Reason.
    pub const RESULT_REASON: Self = Self(0x42007E);
    /// Result Status.
    pub const RESULT_STATUS: Self = Self(0x42007F);
    /// Revocation Message.
    pub const REVOCATION_MESSAGE: Self = Self(0x420080);
    /// Revocation Reason.
    pub const REVOCATION_REASON: Self = Self(0x420081);
    /// Revocation Reason Code.
    pub const REVOCATION_REASON_CODE: Self = Self(0x420082);
    /// Secret Data.
    pub const SECRET_DATA: Self = Self(0x420085);
    /// Secret Data Type.
    pub const SECRET_DATA_TYPE: Self = Self(0x420086);
    /// Server Information.
    pub const SERVER_INFORMATION: Self = Self(0x420088);
    /// State.
    pub const STATE: Self = Self(0x42008D);
    /// Symmetric Key.
    pub const SYMMETRIC_KEY: Self = Self(0x42008F);
    /// Template.
    pub const TEMPLATE: Self = Self(0x420090);
    /// Template Attribute.
    pub const TEMPLATE_ATTRIBUTE: Self = Self(0x420091);
    /// Time Stamp.
    pub const TIME_STAMP: Self = Self(0x420092);
    /// Unique Batch Item ID.
    pub const UNIQUE_BATCH_ITEM_ID: Self = Self(0x420093);
    /// Unique Identifier.
    pub const UNIQUE_IDENTIFIER: Self = Self(0x420094);
    /// Usage Limits.
    pub const USAGE_LIMITS: Self = Self(0x420095);
    /// Usage Limits Count.
    pub const USAGE_LIMITS_COUNT: Self = Self(0x420096);
    /// Username.
    pub const USERNAME: Self = Self(0x420099);
    /// Vendor Identification.
    pub const VENDOR_IDENTIFICATION: Self = Self(0x42009D);
    /// Wrapping Method.
    pub const WRAPPING_METHOD: Self = Self(0x42009E);
    /// Password.
    pub const PASSWORD: Self = Self(0x4200A1);
    /// Fresh.
    pub const FRESH: Self = Self(0x4200A8);
    /// Original Creation Date.
    pub const ORIGINAL_CREATION_DATE: Self = Self(0x4200BC);
    /// Data.
    pub const DATA: Self = Self(0x4200C2);
    /// Data Length.
    pub const DATA_LENGTH: Self = Self(0x4200C4);
    /// Random IV.
    pub const RANDOM_IV: Self = Self(0x4200C5);
    /// MAC Data.
    pub const MAC_DATA: Self = Self(0x4200C6);
    /// IV Length.
    pub const IV_LENGTH: Self = Self(0x4200CD);
    /// Tag Length.
    pub const TAG_LENGTH: Self = Self(0x4200CE);
    /// Offset Items.
    pub const OFFSET_ITEMS: Self = Self(0x4200D4);
    /// Located Items.
    pub const LOCATED_ITEMS: Self = Self(0x4200D5);
    /// Correlation Value (streamed cryptographic operations).
    pub const CORRELATION_VALUE: Self = Self(0x4200D6);
    /// Init Indicator.
    pub const INIT_INDICATOR: Self = Self(0x4200D7);
    /// Final Indicator.
    pub const FINAL_INDICATOR: Self = Self(0x4200D8);
    /// Validity Indicator.
    pub const VALIDITY_INDICATOR: Self = Self(0x42009B);
    /// Digital Signature Algorithm.
    pub const DIGITAL_SIGNATURE_ALGORITHM: Self = Self(0x4200AE);
    /// Signature Data.
    pub const SIGNATURE_DATA: Self = Self(0x4200C3);
    /// Salt Length.
    pub const SALT_LENGTH: Self = Self(0x420100);
    /// Mask Generator.
    pub const MASK_GENERATOR: Self = Self(0x420101);
    /// Mask Generator Hashing Algorithm.
    pub const MASK_GENERATOR_HASHING_ALGORITHM: Self = Self(0x420102);
    /// P Source.
    pub const P_SOURCE: Self = Self(0x420103);
    /// Trailer Field.
    pub const TRAILER_FIELD: Self = Self(0x420104);
    /// Digested Data.
    pub const DIGESTED_DATA: Self = Self(0x420107);
    /// Authenticated Encryption Additional Data.
    pub const AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA: Self = Self(0x4200FE);
    /// Authenticated Encryption Tag.
    pub const AUTHENTICATED_ENCRYPTION_TAG: Self = Self(0x4200FF);
    /// Attributes.
    pub const ATTRIBUTES: Self = Self(0x420125);
    /// Common Attributes.
    pub const COMMON_ATTRIBUTES: Self = Self(0x420126);
    /// Attribute Reference.
    pub const ATTRIBUTE_REFERENCE: Self = Self(0x42013B);
    /// Current Attribute.
    pub const CURRENT_ATTRIBUTE: Self = Self(0x42013C);
    /// New Attribute.
    pub const NEW_ATTRIBUTE: Self = Self(0x42013D);

    /// The specification name of a known tag.
    #[must_use]
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Self::ACTIVATION_DATE => "Activation Date",
            Self::APPLICATION_DATA => "Application Data",
            Self::APPLICATION_NAMESPACE => "Application Namespace",
            Self::APPLICATION_SPECIFIC_INFORMATION => "Application Specific Information",
            Self::ARCHIVE_DATE => "Archive Date",
            Self::ASYNCHRONOUS_CORRELATION_VALUE => "Asynchronous Correlation Value",
            Self::ASYNCHRONOUS_INDICATOR => "Asynchronous Indicator",
            Self::ATTRIBUTE => "Attribute",
            Self::ATTRIBUTE_INDEX => "Attribute Index",
            Self::ATTRIBUTE_NAME => "Attribute Name",
            Self::ATTRIBUTE_VALUE => "Attribute Value",
            Self::AUTHENTICATION => "Authentication",
            Self::BATCH_COUNT => "Batch Count",
            Self::BATCH_ERROR_CONTINUATION_OPTION => "Batch Error Continuation Option",
            Self::BATCH_ITEM => "Batch Item",
            Self::BATCH_ORDER_OPTION => "Batch Order Option",
            Self::BLOCK_CIPHER_MODE => "Block Cipher Mode",
            Self::COMPROMISE_DATE => "Compromise Date",
            Self::COMPROMISE_OCCURRENCE_DATE => "Compromise Occurrence Date",
            Self::CONTACT_INFORMATION => "Contact Information",
            Self::CREDENTIAL => "Credential",
            Self::CREDENTIAL_TYPE => "Credential Type",
            Self::CREDENTIAL_VALUE => "Credential Value",
            Self::CRYPTOGRAPHIC_ALGORITHM => "Cryptographic Algorithm",
            Self::CRYPTOGRAPHIC_LENGTH => "Cryptographic Length",
            Self::CRYPTOGRAPHIC_PARAMETERS => "Cryptographic Parameters",
            Self::CRYPTOGRAPHIC_USAGE_MASK => "Cryptographic Usage Mask",
            Self::DEACTIVATION_DATE => "Deactivation Date",
            Self::DESTROY_DATE => "Destroy Date",
            Self::DIGEST => "Digest",
            Self::ENCRYPTION_KEY_INFORMATION => "Encryption Key Information",
            Self::HASHING_ALGORITHM => "Hashing Algorithm",
            Self::INITIAL_DATE => "Initial Date",
            Self::INITIALIZATION_VECTOR => "Initialization Vector",
            Self::DERIVATION_DATA => "Derivation Data",
            Self::DERIVATION_METHOD => "Derivation Method",
            Self::DERIVATION_PARAMETERS => "Derivation Parameters",
            Self::ITERATION_COUNT => "Iteration Count",
            Self::SALT => "Salt",
            Self::IV_COUNTER_NONCE => "IV/Counter/Nonce",
            Self::KEY => "Key",
            Self::KEY_BLOCK => "Key Block",
            Self::KEY_COMPRESSION_TYPE => "Key Compression Type",
            Self::KEY_FORMAT_TYPE => "Key Format Type",
            Self::KEY_MATERIAL => "Key Material",
            Self::KEY_VALUE => "Key Value",
            Self::KEY_WRAPPING_DATA => "Key Wrapping Data",
            Self::KEY_WRAPPING_SPECIFICATION => "Key Wrapping Specification",
            Self::LAST_CHANGE_DATE => "Last Change Date",
            Self::LEASE_TIME => "Lease Time",
            Self::LINK => "Link",
            Self::LINK_TYPE => "Link Type",
            Self::LINKED_OBJECT_IDENTIFIER => "Linked Object Identifier",
            Self::MAC_SIGNATURE => "MAC/Signature",
            Self::MAC_SIGNATURE_KEY_INFORMATION => "MAC/Signature Key Information",
            Self::MAXIMUM_ITEMS => "Maximum Items",
            Self::MAXIMUM_RESPONSE_SIZE => "Maximum Response Size",
            Self::MESSAGE_EXTENSION => "Message Extension",
            Self::NAME => "Name",
            Self::NAME_TYPE => "Name Type",
            Self::NAME_VALUE => "Name Value",
            Self::OBJECT_GROUP => "Object Group",
            Self::OBJECT_TYPE => "Object Type",
            Self::OFFSET => "Offset",
            Self::OPERATION => "Operation",
            Self::OPERATION_POLICY_NAME => "Operation Policy Name",
            Self::PADDING_METHOD => "Padding Method",
            Self::PROCESS_START_DATE => "Process Start Date",
            Self::PROTECT_STOP_DATE => "Protect Stop Date",
            Self::PROTOCOL_VERSION => "Protocol Version",
            Self::PROTOCOL_VERSION_MAJOR => "Protocol Version Major",
            Self::PROTOCOL_VERSION_MINOR => "Protocol Version Minor",
            Self::QUERY_FUNCTION => "Query Function",
            Self::REPLACED_UNIQUE_IDENTIFIER => "Replaced Unique Identifier",
            Self::REQUEST_HEADER => "Request Header",
            Self::REQUEST_MESSAGE => "Request Message",
            Self::REQUEST_PAYLOAD => "Request Payload",
            Self::RESPONSE_HEADER => "Response Header",
            Self::RESPONSE_MESSAGE => "Response Message",
            Self::RESPONSE_PAYLOAD => "Response Payload",
            Self::RESULT_MESSAGE => "Result Message",
            Self::RESULT_REASON => "Result Reason",
            Self::RESULT_STATUS => "Result Status",
            Self::REVOCATION_MESSAGE => "Revocation Message",
            Self::REVOCATION_REASON => "Revocation Reason",
            Self::REVOCATION_REASON_CODE => "Revocation Reason Code",
            Self::SECRET_DATA => "Secret Data",
            Self::SECRET_DATA_TYPE => "Secret Data Type",
            Self::SERVER_INFORMATION => "Server Information",
            Self::STATE => "State",
            Self::SYMMETRIC_KEY => "Symmetric Key",
            Self::TEMPLATE => "Template",
            Self::TEMPLATE_ATTRIBUTE => "Template Attribute",
            Self::TIME_STAMP => "Time Stamp",
            Self::UNIQUE_BATCH_ITEM_ID => "Unique Batch Item ID",
            Self::UNIQUE_IDENTIFIER => "Unique Identifier",
            Self::USAGE_LIMITS => "Usage Limits",
            Self::USAGE_LIMITS_COUNT => "Usage Limits Count",
            Self::USERNAME => "Username",
            Self::VENDOR_IDENTIFICATION => "Vendor Identification",
            Self::WRAPPING_METHOD => "Wrapping Method",
            Self::PASSWORD => "Password",
            Self::FRESH => "Fresh",
            Self::ORIGINAL_CREATION_DATE => "Original Creation Date",
            Self::DATA => "Data",
            Self::DATA_LENGTH => "Data Length",
            Self::RANDOM_IV => "Random IV",
            Self::MAC_DATA => "MAC Data",
            Self::IV_LENGTH => "IV Length",
            Self::TAG_LENGTH => "Tag Length",
            Self::OFFSET_ITEMS => "Offset Items",
            Self::LOCATED_ITEMS => "Located Items",
            Self::CORRELATION_VALUE => "Correlation Value",
            Self::INIT_INDICATOR => "Init Indicator",
            Self::FINAL_INDICATOR => "Final Indicator",
            Self::VALIDITY_INDICATOR => "Validity Indicator",
            Self::DIGITAL_SIGNATURE_ALGORITHM => "Digital Signature Algorithm",
            Self::SIGNATURE_DATA => "Signature Data",
            Self::SALT_LENGTH => "Salt Length",
            Self::MASK_GENERATOR => "Mask Generator",
            Self::MASK_GENERATOR_HASHING_ALGORITHM => "Mask Generator Hashing Algorithm",
            Self::P_SOURCE => "P Source",
            Self::TRAILER_FIELD => "Trailer Field",
            Self::DIGESTED_DATA => "Digested Data",
            Self::AUTHENTICATED_ENCRYPTION_ADDITIONAL_DATA => {
                "Authenticated Encryption Additional Data"
            }
            Self::AUTHENTICATED_ENCRYPTION_TAG => "Authenticated Encryption Tag",
            Self::ATTRIBUTES => "Attributes",
            Self::COMMON_ATTRIBUTES => "Common Attributes",
            Self::ATTRIBUTE_REFERENCE => "Attribute Reference",
            Self::CURRENT_ATTRIBUTE => "Current Attribute",
            Self::NEW_ATTRIBUTE => "New Attribute",
            _ => return self.object_tag_name(),
        })
    }
}

/// The tags of the managed objects other than Symmetric Key and Secret
/// Data (KMIP 1.4 §2.2, KMIP 2.1 §2), their key formats and attributes,
/// and Create Key Pair's fields.
impl Tag {
    /// Certificate.
    pub const CERTIFICATE: Self = Self(0x420013);
    /// Certificate Identifier.
    pub const CERTIFICATE_IDENTIFIER: Self = Self(0x420014);
    /// Certificate Issuer.
    pub const CERTIFICATE_ISSUER: Self = Self(0x420015);
    /// Certificate Issuer Distinguished Name.
    pub const CERTIFICATE_ISSUER_DISTINGUISHED_NAME: Self = Self(0x420017);
    /// Certificate Request (KMIP 1.x Certify and Re-certify).
    pub const CERTIFICATE_REQUEST: Self = Self(0x420018);
    /// Certificate Request Type.
    pub const CERTIFICATE_REQUEST_TYPE: Self = Self(0x420019);
    /// Certificate Subject.
    pub const CERTIFICATE_SUBJECT: Self = Self(0x42001A);
    /// Certificate Subject Distinguished Name.
    pub const CERTIFICATE_SUBJECT_DISTINGUISHED_NAME: Self = Self(0x42001C);
    /// Certificate Type.
    pub const CERTIFICATE_TYPE: Self = Self(0x42001D);
    /// Certificate Value.
    pub const CERTIFICATE_VALUE: Self = Self(0x42001E);
    /// Common Template-Attribute.
    pub const COMMON_TEMPLATE_ATTRIBUTE: Self = Self(0x42001F);
    /// CRT Coefficient.
    pub const CRT_COEFFICIENT: Self = Self(0x420027);
    /// Issuer.
    pub const ISSUER: Self = Self(0x42003B);
    /// Key Part Identifier.
    pub const KEY_PART_IDENTIFIER: Self = Self(0x420044);
    /// Modulus.
    pub const MODULUS: Self = Self(0x420052);
    /// G (a DSA generator).
    pub const G: Self = Self(0x420037);
    /// X (a DSA private key).
    pub const X: Self = Self(0x42009F);
    /// Y (a DSA public key).
    pub const Y: Self = Self(0x4200A0);
    /// Opaque Data Type.
    pub const OPAQUE_DATA_TYPE: Self = Self(0x420059);
    /// Opaque Data Value.
    pub const OPAQUE_DATA_VALUE: Self = Self(0x42005A);
    /// Opaque Object.
    pub const OPAQUE_OBJECT: Self = Self(0x42005B);
    /// P.
    pub const P: Self = Self(0x42005E);
    /// Prime Exponent P.
    pub const PRIME_EXPONENT_P: Self = Self(0x420060);
    /// Prime Exponent Q.
    pub const PRIME_EXPONENT_Q: Self = Self(0x420061);
    /// Prime Field Size.
    pub const PRIME_FIELD_SIZE: Self = Self(0x420062);
    /// Private Exponent.
    pub const PRIVATE_EXPONENT: Self = Self(0x420063);
    /// Private Key.
    pub const PRIVATE_KEY: Self = Self(0x420064);
    /// Private Key Template-Attribute.
    pub const PRIVATE_KEY_TEMPLATE_ATTRIBUTE: Self = Self(0x420065);
    /// Private Key Unique Identifier.
    pub const PRIVATE_KEY_UNIQUE_IDENTIFIER: Self = Self(0x420066);
    /// Public Exponent.
    pub const PUBLIC_EXPONENT: Self = Self(0x42006C);
    /// Public Key.
    pub const PUBLIC_KEY: Self = Self(0x42006D);
    /// Public Key Template-Attribute.
    pub const PUBLIC_KEY_TEMPLATE_ATTRIBUTE: Self = Self(0x42006E);
    /// Public Key Unique Identifier.
    pub const PUBLIC_KEY_UNIQUE_IDENTIFIER: Self = Self(0x42006F);
    /// Q.
    pub const Q: Self = Self(0x420071);
    /// Serial Number.
    pub const SERIAL_NUMBER: Self = Self(0x420087);
    /// Split Key.
    pub const SPLIT_KEY: Self = Self(0x420089);
    /// Split Key Method.
    pub const SPLIT_KEY_METHOD: Self = Self(0x42008A);
    /// Split Key Parts.
    pub const SPLIT_KEY_PARTS: Self = Self(0x42008B);
    /// Split Key Threshold.
    pub const SPLIT_KEY_THRESHOLD: Self = Self(0x42008C);
    /// Certificate Length.
    pub const CERTIFICATE_LENGTH: Self = Self(0x4200AD);
    /// Certificate Serial Number.
    pub const CERTIFICATE_SERIAL_NUMBER: Self = Self(0x4200AF);
    /// Issuer Distinguished Name.
    pub const ISSUER_DISTINGUISHED_NAME: Self = Self(0x4200B2);
    /// Subject Distinguished Name.
    pub const SUBJECT_DISTINGUISHED_NAME: Self = Self(0x4200B4);
    /// X.509 Certificate Identifier.
    pub const X509_CERTIFICATE_IDENTIFIER: Self = Self(0x4200B5);
    /// X.509 Certificate Issuer.
    pub const X509_CERTIFICATE_ISSUER: Self = Self(0x4200B6);
    /// X.509 Certificate Subject.
    pub const X509_CERTIFICATE_SUBJECT: Self = Self(0x4200B7);
    /// Private Key Attributes.
    pub const PRIVATE_KEY_ATTRIBUTES: Self = Self(0x420127);
    /// Public Key Attributes.
    pub const PUBLIC_KEY_ATTRIBUTES: Self = Self(0x420128);
    /// Certificate Request Unique Identifier (KMIP 2.x Re-certify).
    pub const CERTIFICATE_REQUEST_UNIQUE_IDENTIFIER: Self = Self(0x420139);
    /// Certificate Request Value (KMIP 2.x Certify and Re-certify).
    pub const CERTIFICATE_REQUEST_VALUE: Self = Self(0x420140);

    fn object_tag_name(self) -> Option<&'static str> {
        Some(match self {
            Self::CERTIFICATE => "Certificate",
            Self::CERTIFICATE_IDENTIFIER => "Certificate Identifier",
            Self::CERTIFICATE_ISSUER => "Certificate Issuer",
            Self::CERTIFICATE_ISSUER_DISTINGUISHED_NAME => "Certificate Issuer Distinguished Name",
            Self::CERTIFICATE_REQUEST => "Certificate Request",
            Self::CERTIFICATE_REQUEST_TYPE => "Certificate Request Type",
            Self::CERTIFICATE_SUBJECT => "Certificate Subject",
            Self::CERTIFICATE_SUBJECT_DISTINGUISHED_NAME => {
                "Certificate Subject Distinguished Name"
            }
            Self::CERTIFICATE_TYPE => "Certificate Type",
            Self::CERTIFICATE_VALUE => "Certificate Value",
            Self::COMMON_TEMPLATE_ATTRIBUTE => "Common Template-Attribute",
            Self::CRT_COEFFICIENT => "CRT Coefficient",
            Self::ISSUER => "Issuer",
            Self::KEY_PART_IDENTIFIER => "Key Part Identifier",
            Self::MODULUS => "Modulus",
            Self::G => "G",
            Self::X => "X",
            Self::Y => "Y",
            Self::OPAQUE_DATA_TYPE => "Opaque Data Type",
            Self::OPAQUE_DATA_VALUE => "Opaque Data Value",
            Self::OPAQUE_OBJECT => "Opaque Object",
            Self::P => "P",
            Self::PRIME_EXPONENT_P => "Prime Exponent P",
            Self::PRIME_EXPONENT_Q => "Prime Exponent Q",
            Self::PRIME_FIELD_SIZE => "Prime Field Size",
            Self::PRIVATE_EXPONENT => "Private Exponent",
            Self::PRIVATE_KEY => "Private Key",
            Self::PRIVATE_KEY_TEMPLATE_ATTRIBUTE => "Private Key Template-Attribute",
            Self::PRIVATE_KEY_UNIQUE_IDENTIFIER => "Private Key Unique Identifier",
            Self::PUBLIC_EXPONENT => "Public Exponent",
            Self::PUBLIC_KEY => "Public Key",
            Self::PUBLIC_KEY_TEMPLATE_ATTRIBUTE => "Public Key Template-Attribute",
            Self::PUBLIC_KEY_UNIQUE_IDENTIFIER => "Public Key Unique Identifier",
            Self::Q => "Q",
            Self::SERIAL_NUMBER => "Serial Number",
            Self::SPLIT_KEY => "Split Key",
            Self::SPLIT_KEY_METHOD => "Split Key Method",
            Self::SPLIT_KEY_PARTS => "Split Key Parts",
            Self::SPLIT_KEY_THRESHOLD => "Split Key Threshold",
            Self::CERTIFICATE_LENGTH => "Certificate Length",
            Self::CERTIFICATE_SERIAL_NUMBER => "Certificate Serial Number",
            Self::ISSUER_DISTINGUISHED_NAME => "Issuer Distinguished Name",
            Self::SUBJECT_DISTINGUISHED_NAME => "Subject Distinguished Name",
            Self::X509_CERTIFICATE_IDENTIFIER => "X.509 Certificate Identifier",
            Self::X509_CERTIFICATE_ISSUER => "X.509 Certificate Issuer",
            Self::X509_CERTIFICATE_SUBJECT => "X.509 Certificate Subject",
            Self::PRIVATE_KEY_ATTRIBUTES => "Private Key Attributes",
            Self::PUBLIC_KEY_ATTRIBUTES => "Public Key Attributes",
            Self::CERTIFICATE_REQUEST_UNIQUE_IDENTIFIER => "Certificate Request Unique Identifier",
            Self::CERTIFICATE_REQUEST_VALUE => "Certificate Request Value",
            _ => return None,
        })
    }
}

impl std::fmt::Debug for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} (0x{:06X})", self.0),
            None => write!(f, "0x{:06X}", self.0),
        }
    }
}

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}
