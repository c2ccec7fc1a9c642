//! KMIP enumerations (KMIP 1.4 §9.1.3.2, KMIP 2.1 §11). Each is a
//! newtype over the wire value with the known values as constants: a value
//! this list does not know is kept (and answered with a Result Reason by
//! whoever needs it), never a decoding failure.

macro_rules! kmip_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident = $value:expr => $text:literal,)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);

        impl $name {
            $(
                #[doc = $text]
                pub const $variant: Self = Self($value);
            )*

            /// The specification name of a known value.
            #[must_use]
            pub fn name(self) -> Option<&'static str> {
                Some(match self {
                    $(Self::$variant => $text,)*
                    _ => return None,
                })
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.name() {
                    Some(name) => f.write_str(name),
                    None => write!(f, "{}(0x{:08X})", stringify!($name), self.0),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(self, f)
            }
        }
    };
}

kmip_enum!(
    /// Operation (KMIP 1.4 §9.1.3.2.27; 2.1 adds more, kept as numbers).
    Operation {
        CREATE = 0x01 => "Create",
        CREATE_KEY_PAIR = 0x02 => "Create Key Pair",
        REGISTER = 0x03 => "Register",
        RE_KEY = 0x04 => "Re-key",
        DERIVE_KEY = 0x05 => "Derive Key",
        CERTIFY = 0x06 => "Certify",
        RE_CERTIFY = 0x07 => "Re-certify",
        LOCATE = 0x08 => "Locate",
        CHECK = 0x09 => "Check",
        GET = 0x0A => "Get",
        GET_ATTRIBUTES = 0x0B => "Get Attributes",
        GET_ATTRIBUTE_LIST = 0x0C => "Get Attribute List",
        ADD_ATTRIBUTE = 0x0D => "Add Attribute",
        MODIFY_ATTRIBUTE = 0x0E => "Modify Attribute",
        DELETE_ATTRIBUTE = 0x0F => "Delete Attribute",
        OBTAIN_LEASE = 0x10 => "Obtain Lease",
        GET_USAGE_ALLOCATION = 0x11 => "Get Usage Allocation",
        ACTIVATE = 0x12 => "Activate",
        REVOKE = 0x13 => "Revoke",
        DESTROY = 0x14 => "Destroy",
        ARCHIVE = 0x15 => "Archive",
        RECOVER = 0x16 => "Recover",
        VALIDATE = 0x17 => "Validate",
        QUERY = 0x18 => "Query",
        CANCEL = 0x19 => "Cancel",
        POLL = 0x1A => "Poll",
        NOTIFY = 0x1B => "Notify",
        PUT = 0x1C => "Put",
        RE_KEY_KEY_PAIR = 0x1D => "Re-key Key Pair",
        DISCOVER_VERSIONS = 0x1E => "Discover Versions",
        ENCRYPT = 0x1F => "Encrypt",
        DECRYPT = 0x20 => "Decrypt",
        SIGN = 0x21 => "Sign",
        SIGNATURE_VERIFY = 0x22 => "Signature Verify",
        MAC = 0x23 => "MAC",
        MAC_VERIFY = 0x24 => "MAC Verify",
        RNG_RETRIEVE = 0x25 => "RNG Retrieve",
        RNG_SEED = 0x26 => "RNG Seed",
        HASH = 0x27 => "Hash",
        CREATE_SPLIT_KEY = 0x28 => "Create Split Key",
        JOIN_SPLIT_KEY = 0x29 => "Join Split Key",
        IMPORT = 0x2A => "Import",
        EXPORT = 0x2B => "Export",
        // KMIP 2.0 and later.
        LOG = 0x2C => "Log",
        ADJUST_ATTRIBUTE = 0x30 => "Adjust Attribute",
        SET_ATTRIBUTE = 0x31 => "Set Attribute",
        INTEROP = 0x34 => "Interop",
    }
);

kmip_enum!(
    /// Result Status.
    ResultStatus {
        SUCCESS = 0x00 => "Success",
        OPERATION_FAILED = 0x01 => "Operation Failed",
        OPERATION_PENDING = 0x02 => "Operation Pending",
        OPERATION_UNDONE = 0x03 => "Operation Undone",
    }
);

kmip_enum!(
    /// Result Reason.
    ResultReason {
        ITEM_NOT_FOUND = 0x01 => "Item Not Found",
        RESPONSE_TOO_LARGE = 0x02 => "Response Too Large",
        AUTHENTICATION_NOT_SUCCESSFUL = 0x03 => "Authentication Not Successful",
        INVALID_MESSAGE = 0x04 => "Invalid Message",
        OPERATION_NOT_SUPPORTED = 0x05 => "Operation Not Supported",
        MISSING_DATA = 0x06 => "Missing Data",
        INVALID_FIELD = 0x07 => "Invalid Field",
        FEATURE_NOT_SUPPORTED = 0x08 => "Feature Not Supported",
        OPERATION_CANCELED_BY_REQUESTER = 0x09 => "Operation Canceled By Requester",
        CRYPTOGRAPHIC_FAILURE = 0x0A => "Cryptographic Failure",
        ILLEGAL_OPERATION = 0x0B => "Illegal Operation",
        PERMISSION_DENIED = 0x0C => "Permission Denied",
        OBJECT_ARCHIVED = 0x0D => "Object Archived",
        INDEX_OUT_OF_BOUNDS = 0x0E => "Index Out Of Bounds",
        APPLICATION_NAMESPACE_NOT_SUPPORTED = 0x0F => "Application Namespace Not Supported",
        KEY_FORMAT_TYPE_NOT_SUPPORTED = 0x10 => "Key Format Type Not Supported",
        KEY_COMPRESSION_TYPE_NOT_SUPPORTED = 0x11 => "Key Compression Type Not Supported",
        ENCODING_OPTION_ERROR = 0x12 => "Encoding Option Error",
        KEY_VALUE_NOT_PRESENT = 0x13 => "Key Value Not Present",
        ATTESTATION_REQUIRED = 0x14 => "Attestation Required",
        ATTESTATION_FAILED = 0x15 => "Attestation Failed",
        SENSITIVE = 0x16 => "Sensitive",
        NOT_EXTRACTABLE = 0x17 => "Not Extractable",
        OBJECT_ALREADY_EXISTS = 0x18 => "Object Already Exists",
        // KMIP 2.0 and later.
        INCOMPATIBLE_CRYPTOGRAPHIC_USAGE_MASK = 0x29 => "Incompatible Cryptographic Usage Mask",
        NUMERIC_RANGE = 0x1B => "Numeric Range",
        INVALID_DATA_TYPE = 0x1C => "Invalid Data Type",
        MULTI_VALUED_ATTRIBUTE = 0x1E => "Multi Valued Attribute",
        ATTRIBUTE_READ_ONLY = 0x22 => "Attribute Read Only",
        ATTRIBUTE_SINGLE_VALUED = 0x23 => "Attribute Single Valued",
        INVALID_CSR = 0x2F => "Invalid CSR",
        INVALID_OBJECT_TYPE = 0x30 => "Invalid Object Type",
        NON_UNIQUE_NAME_ATTRIBUTE = 0x35 => "Non Unique Name Attribute",
        OBJECT_DESTROYED = 0x36 => "Object Destroyed",
        OBJECT_NOT_FOUND = 0x37 => "Object Not Found",
        WRONG_KEY_LIFECYCLE_STATE = 0x43 => "Wrong Key Lifecycle State",
        GENERAL_FAILURE = 0x100 => "General Failure",
    }
);

kmip_enum!(
    /// Batch Error Continuation Option.
    BatchErrorContinuationOption {
        CONTINUE = 0x01 => "Continue",
        STOP = 0x02 => "Stop",
        UNDO = 0x03 => "Undo",
    }
);

kmip_enum!(
    /// Object Type.
    ObjectType {
        CERTIFICATE = 0x01 => "Certificate",
        SYMMETRIC_KEY = 0x02 => "Symmetric Key",
        PUBLIC_KEY = 0x03 => "Public Key",
        PRIVATE_KEY = 0x04 => "Private Key",
        SPLIT_KEY = 0x05 => "Split Key",
        TEMPLATE = 0x06 => "Template",
        SECRET_DATA = 0x07 => "Secret Data",
        OPAQUE_OBJECT = 0x08 => "Opaque Object",
        PGP_KEY = 0x09 => "PGP Key",
    }
);

kmip_enum!(
    /// State.
    State {
        PRE_ACTIVE = 0x01 => "Pre-Active",
        ACTIVE = 0x02 => "Active",
        DEACTIVATED = 0x03 => "Deactivated",
        COMPROMISED = 0x04 => "Compromised",
        DESTROYED = 0x05 => "Destroyed",
        DESTROYED_COMPROMISED = 0x06 => "Destroyed Compromised",
    }
);

kmip_enum!(
    /// Cryptographic Algorithm (the symmetric ones and HMACs).
    CryptographicAlgorithm {
        DES = 0x01 => "DES",
        TRIPLE_DES = 0x02 => "3DES",
        AES = 0x03 => "AES",
        RSA = 0x04 => "RSA",
        DSA = 0x05 => "DSA",
        ECDSA = 0x06 => "ECDSA",
        HMAC_SHA1 = 0x07 => "HMAC-SHA1",
        HMAC_SHA224 = 0x08 => "HMAC-SHA224",
        HMAC_SHA256 = 0x09 => "HMAC-SHA256",
        HMAC_SHA384 = 0x0A => "HMAC-SHA384",
        HMAC_SHA512 = 0x0B => "HMAC-SHA512",
        HMAC_MD5 = 0x0C => "HMAC-MD5",
        EC = 0x1A => "EC",
        CHACHA20 = 0x1C => "ChaCha20",
        CHACHA20_POLY1305 = 0x1E => "ChaCha20Poly1305",
        ED25519 = 0x37 => "Ed25519",
    }
);

kmip_enum!(
    /// Block Cipher Mode.
    BlockCipherMode {
        CBC = 0x01 => "CBC",
        ECB = 0x02 => "ECB",
        PCBC = 0x03 => "PCBC",
        CFB = 0x04 => "CFB",
        OFB = 0x05 => "OFB",
        CTR = 0x06 => "CTR",
        CMAC = 0x07 => "CMAC",
        CCM = 0x08 => "CCM",
        GCM = 0x09 => "GCM",
        CBC_MAC = 0x0A => "CBC-MAC",
        XTS = 0x0B => "XTS",
        AES_KEY_WRAP_PADDING = 0x0C => "AESKeyWrapPadding",
        NIST_KEY_WRAP = 0x0D => "NISTKeyWrap",
        AEAD = 0x12 => "AEAD",
    }
);

kmip_enum!(
    /// Derivation Method (KMIP 1.4 §9.1.3.2.21).
    DerivationMethod {
        PBKDF2 = 0x01 => "PBKDF2",
        HASH = 0x02 => "HASH",
        HMAC = 0x03 => "HMAC",
        ENCRYPT = 0x04 => "ENCRYPT",
        NIST800_108_C = 0x05 => "NIST800-108-C",
        NIST800_108_F = 0x06 => "NIST800-108-F",
        NIST800_108_DPI = 0x07 => "NIST800-108-DPI",
        ASYMMETRIC_KEY = 0x08 => "Asymmetric Key",
    }
);

kmip_enum!(
    /// Padding Method.
    PaddingMethod {
        NONE = 0x01 => "None",
        OAEP = 0x02 => "OAEP",
        PKCS5 = 0x03 => "PKCS5",
        SSL3 = 0x04 => "SSL3",
        ZEROS = 0x05 => "Zeros",
        ANSI_X923 = 0x06 => "ANSI X9.23",
        ISO_10126 = 0x07 => "ISO 10126",
        PKCS1_V1_5 = 0x08 => "PKCS1 v1.5",
        X931 = 0x09 => "X9.31",
        PSS = 0x0A => "PSS",
    }
);

kmip_enum!(
    /// Hashing Algorithm.
    HashingAlgorithm {
        MD5 = 0x03 => "MD5",
        SHA1 = 0x04 => "SHA-1",
        SHA224 = 0x05 => "SHA-224",
        SHA256 = 0x06 => "SHA-256",
        SHA384 = 0x07 => "SHA-384",
        SHA512 = 0x08 => "SHA-512",
        SHA512_224 = 0x0C => "SHA-512/224",
        SHA512_256 = 0x0D => "SHA-512/256",
        SHA3_224 = 0x0E => "SHA3-224",
        SHA3_256 = 0x0F => "SHA3-256",
        SHA3_384 = 0x10 => "SHA3-384",
        SHA3_512 = 0x11 => "SHA3-512",
    }
);

kmip_enum!(
    /// Validity Indicator (MAC Verify's answer).
    ValidityIndicator {
        VALID = 0x01 => "Valid",
        INVALID = 0x02 => "Invalid",
        UNKNOWN = 0x03 => "Unknown",
    }
);

kmip_enum!(
    /// Key Format Type.
    KeyFormatType {
        RAW = 0x01 => "Raw",
        OPAQUE = 0x02 => "Opaque",
        PKCS1 = 0x03 => "PKCS#1",
        PKCS8 = 0x04 => "PKCS#8",
        X509 = 0x05 => "X.509",
        EC_PRIVATE_KEY = 0x06 => "ECPrivateKey",
        TRANSPARENT_SYMMETRIC_KEY = 0x07 => "Transparent Symmetric Key",
        TRANSPARENT_DSA_PRIVATE_KEY = 0x08 => "Transparent DSA Private Key",
        TRANSPARENT_DSA_PUBLIC_KEY = 0x09 => "Transparent DSA Public Key",
        TRANSPARENT_RSA_PRIVATE_KEY = 0x0A => "Transparent RSA Private Key",
        TRANSPARENT_RSA_PUBLIC_KEY = 0x0B => "Transparent RSA Public Key",
    }
);

kmip_enum!(
    /// Certificate Type.
    CertificateType {
        X509 = 0x01 => "X.509",
        PGP = 0x02 => "PGP",
    }
);

kmip_enum!(
    /// Certificate Request Type (KMIP 1.4 §9.1.3.2.22, 2.1 §11.8).
    CertificateRequestType {
        CRMF = 0x01 => "CRMF",
        PKCS10 = 0x02 => "PKCS#10",
        PEM = 0x03 => "PEM",
        PGP = 0x04 => "PGP",
    }
);

kmip_enum!(
    /// Split Key Method.
    SplitKeyMethod {
        XOR = 0x01 => "XOR",
        POLYNOMIAL_SHARING_GF_2_16 = 0x02 => "Polynomial Sharing GF (2^16)",
        POLYNOMIAL_SHARING_PRIME_FIELD = 0x03 => "Polynomial Sharing Prime Field",
        POLYNOMIAL_SHARING_GF_2_8 = 0x04 => "Polynomial Sharing GF (2^8)",
    }
);

kmip_enum!(
    /// Adjustment Type (KMIP 2.1 §11.1).
    AdjustmentType {
        INCREMENT = 0x01 => "Increment",
        DECREMENT = 0x02 => "Decrement",
        NEGATE = 0x03 => "Negate",
    }
);

kmip_enum!(
    /// Name Type.
    NameType {
        UNINTERPRETED_TEXT_STRING = 0x01 => "Uninterpreted Text String",
        URI = 0x02 => "URI",
    }
);

kmip_enum!(
    /// Link Type.
    LinkType {
        CERTIFICATE = 0x101 => "Certificate Link",
        PUBLIC_KEY = 0x102 => "Public Key Link",
        PRIVATE_KEY = 0x103 => "Private Key Link",
        DERIVATION_BASE_OBJECT = 0x104 => "Derivation Base Object Link",
        DERIVED_KEY = 0x105 => "Derived Key Link",
        REPLACEMENT_OBJECT = 0x106 => "Replacement Object Link",
        REPLACED_OBJECT = 0x107 => "Replaced Object Link",
        PARENT = 0x108 => "Parent Link",
        CHILD = 0x109 => "Child Link",
        PREVIOUS = 0x10A => "Previous Link",
        NEXT = 0x10B => "Next Link",
    }
);

kmip_enum!(
    /// Revocation Reason Code.
    RevocationReasonCode {
        UNSPECIFIED = 0x01 => "Unspecified",
        KEY_COMPROMISE = 0x02 => "Key Compromise",
        CA_COMPROMISE = 0x03 => "CA Compromise",
        AFFILIATION_CHANGED = 0x04 => "Affiliation Changed",
        SUPERSEDED = 0x05 => "Superseded",
        CESSATION_OF_OPERATION = 0x06 => "Cessation of Operation",
        PRIVILEGE_WITHDRAWN = 0x07 => "Privilege Withdrawn",
    }
);

kmip_enum!(
    /// Query Function.
    QueryFunction {
        OPERATIONS = 0x01 => "Query Operations",
        OBJECTS = 0x02 => "Query Objects",
        SERVER_INFORMATION = 0x03 => "Query Server Information",
        APPLICATION_NAMESPACES = 0x04 => "Query Application Namespaces",
        EXTENSION_LIST = 0x05 => "Query Extension List",
        EXTENSION_MAP = 0x06 => "Query Extension Map",
        ATTESTATION_TYPES = 0x07 => "Query Attestation Types",
        RNGS = 0x08 => "Query RNGs",
        VALIDATIONS = 0x09 => "Query Validations",
        PROFILES = 0x0A => "Query Profiles",
        CAPABILITIES = 0x0B => "Query Capabilities",
        CLIENT_REGISTRATION_METHODS = 0x0C => "Query Client Registration Methods",
    }
);

kmip_enum!(
    /// Wrapping Method.
    WrappingMethod {
        ENCRYPT = 0x01 => "Encrypt",
        MAC_SIGN = 0x02 => "MAC/sign",
        ENCRYPT_THEN_MAC_SIGN = 0x03 => "Encrypt then MAC/sign",
        MAC_SIGN_THEN_ENCRYPT = 0x04 => "MAC/sign then encrypt",
        TR31 = 0x05 => "TR-31",
    }
);

kmip_enum!(
    /// Secret Data Type.
    SecretDataType {
        PASSWORD = 0x01 => "Password",
        SEED = 0x02 => "Seed",
    }
);

kmip_enum!(
    /// Credential Type.
    CredentialType {
        USERNAME_AND_PASSWORD = 0x01 => "Username and Password",
        DEVICE = 0x02 => "Device",
        ATTESTATION = 0x03 => "Attestation",
    }
);

kmip_enum!(
    /// Digital Signature Algorithm (KMIP 1.4 §9.1.3.2.7): of a signature
    /// and of a certificate.
    DigitalSignatureAlgorithm {
        MD2_WITH_RSA = 0x01 => "MD2 with RSA Encryption",
        MD5_WITH_RSA = 0x02 => "MD5 with RSA Encryption",
        SHA1_WITH_RSA = 0x03 => "SHA-1 with RSA Encryption",
        SHA224_WITH_RSA = 0x04 => "SHA-224 with RSA Encryption",
        SHA256_WITH_RSA = 0x05 => "SHA-256 with RSA Encryption",
        SHA384_WITH_RSA = 0x06 => "SHA-384 with RSA Encryption",
        SHA512_WITH_RSA = 0x07 => "SHA-512 with RSA Encryption",
        RSASSA_PSS = 0x08 => "RSASSA-PSS",
        DSA_WITH_SHA1 = 0x09 => "DSA with SHA-1",
        DSA_WITH_SHA224 = 0x0A => "DSA with SHA224",
        DSA_WITH_SHA256 = 0x0B => "DSA with SHA256",
        ECDSA_WITH_SHA1 = 0x0C => "ECDSA with SHA-1",
        ECDSA_WITH_SHA224 = 0x0D => "ECDSA with SHA224",
        ECDSA_WITH_SHA256 = 0x0E => "ECDSA with SHA256",
        ECDSA_WITH_SHA384 = 0x0F => "ECDSA with SHA384",
        ECDSA_WITH_SHA512 = 0x10 => "ECDSA with SHA512",
    }
);

kmip_enum!(
    /// Mask Generator (KMIP 1.4 §9.1.3.2.49).
    MaskGenerator {
        MGF1 = 0x01 => "MGF1",
    }
);

/// Cryptographic Usage Mask bits (KMIP 1.4 §9.1.3.3.1).
pub mod usage_mask {
    pub const SIGN: i32 = 0x0001;
    pub const VERIFY: i32 = 0x0002;
    pub const ENCRYPT: i32 = 0x0004;
    pub const DECRYPT: i32 = 0x0008;
    pub const WRAP_KEY: i32 = 0x0010;
    pub const UNWRAP_KEY: i32 = 0x0020;
    pub const EXPORT: i32 = 0x0040;
    pub const MAC_GENERATE: i32 = 0x0080;
    pub const MAC_VERIFY: i32 = 0x0100;
    pub const DERIVE_KEY: i32 = 0x0200;
}
