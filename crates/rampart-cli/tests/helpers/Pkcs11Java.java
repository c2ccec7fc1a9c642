// Java's SunPKCS11 provider with Rampart's PKCS#11 module: the key
// manager's keys as a PKCS11 KeyStore, AES-GCM encryption and ECDSA/RSA
// signatures computed by the key manager. Compiled and run by
// tests/pkcs11_java.rs (`javac -d DIR Pkcs11Java.java`, `java -cp DIR
// Pkcs11Java SUNPKCS11_CONFIG COMMAND ARGS...`); the PIN is in the
// environment variable PKCS11_PIN.
//
// Commands, each printing `ok ...` lines the test reads:
//   list                            every alias and its entry type
//   aes ALIAS                       AES/GCM/NoPadding round trip with the
//                                   secret key ALIAS; a flipped ciphertext
//                                   bit must fail with AEADBadTagException
//   sign ALIAS ALGORITHM MSG SIG    signs file MSG with the private key
//                                   ALIAS, verifies with the certificate's
//                                   public key in the JDK's own provider,
//                                   writes the signature (DER) to SIG

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.Key;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.Provider;
import java.security.PublicKey;
import java.security.Security;
import java.security.Signature;
import java.security.cert.Certificate;
import java.util.Arrays;
import java.util.Collections;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.SecretKey;
import javax.crypto.spec.GCMParameterSpec;

public final class Pkcs11Java {
    private Pkcs11Java() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            throw new IllegalArgumentException("usage: Pkcs11Java CONFIG COMMAND ARGS...");
        }
        Provider provider = Security.getProvider("SunPKCS11").configure(args[0]);
        Security.addProvider(provider);
        String pin = System.getenv("PKCS11_PIN");
        KeyStore keyStore = KeyStore.getInstance("PKCS11", provider);
        keyStore.load(null, pin == null ? null : pin.toCharArray());
        switch (args[1]) {
            case "list":
                for (String alias : Collections.list(keyStore.aliases())) {
                    String kind = keyStore.isKeyEntry(alias)
                            ? (keyStore.getCertificate(alias) != null ? "private" : "secret")
                            : "certificate";
                    System.out.println("ok alias " + alias + " " + kind);
                }
                break;
            case "aes":
                aes(provider, keyStore, args[2]);
                break;
            case "sign":
                sign(provider, keyStore, args[2], args[3], args[4], args[5]);
                break;
            default:
                throw new IllegalArgumentException("unknown command " + args[1]);
        }
    }

    private static void aes(Provider provider, KeyStore keyStore, String alias) throws Exception {
        Key key = keyStore.getKey(alias, null);
        if (!(key instanceof SecretKey) || !"AES".equals(key.getAlgorithm())) {
            throw new IllegalStateException("entry " + alias + " is not an AES key: " + key);
        }
        byte[] plaintext = ("Rampart through SunPKCS11: " + "x".repeat(100))
                .getBytes(StandardCharsets.UTF_8);
        byte[] aad = "header".getBytes(StandardCharsets.UTF_8);
        byte[] iv = new byte[12];
        new java.security.SecureRandom().nextBytes(iv);

        Cipher encrypt = Cipher.getInstance("AES/GCM/NoPadding", provider);
        encrypt.init(Cipher.ENCRYPT_MODE, key, new GCMParameterSpec(128, iv));
        encrypt.updateAAD(aad);
        byte[] ciphertext = encrypt.doFinal(plaintext);
        if (ciphertext.length != plaintext.length + 16) {
            throw new IllegalStateException("ciphertext of " + ciphertext.length + " bytes");
        }

        Cipher decrypt = Cipher.getInstance("AES/GCM/NoPadding", provider);
        decrypt.init(Cipher.DECRYPT_MODE, key, new GCMParameterSpec(128, iv));
        decrypt.updateAAD(aad);
        byte[] back = decrypt.doFinal(ciphertext);
        if (!Arrays.equals(back, plaintext)) {
            throw new IllegalStateException("decryption gave other bytes");
        }
        System.out.println("ok aes round trip " + ciphertext.length);

        byte[] tampered = ciphertext.clone();
        tampered[3] ^= 0x01;
        Cipher refuse = Cipher.getInstance("AES/GCM/NoPadding", provider);
        refuse.init(Cipher.DECRYPT_MODE, key, new GCMParameterSpec(128, iv));
        refuse.updateAAD(aad);
        try {
            refuse.doFinal(tampered);
            throw new IllegalStateException("a flipped ciphertext bit decrypted");
        } catch (AEADBadTagException expected) {
            System.out.println("ok aes tampered refused " + expected.getClass().getSimpleName());
        }
    }

    private static void sign(Provider provider, KeyStore keyStore, String alias, String algorithm,
            String messageFile, String signatureFile) throws Exception {
        Key key = keyStore.getKey(alias, null);
        if (!(key instanceof PrivateKey)) {
            throw new IllegalStateException("entry " + alias + " is not a private key: " + key);
        }
        Certificate certificate = keyStore.getCertificate(alias);
        byte[] message = Files.readAllBytes(Paths.get(messageFile));

        Signature signer = Signature.getInstance(algorithm, provider);
        signer.initSign((PrivateKey) key);
        signer.update(message);
        byte[] signature = signer.sign();

        // Verified outside the token, by the JDK's own implementation.
        PublicKey publicKey = certificate.getPublicKey();
        String jdk = publicKey.getAlgorithm().equals("EC") ? "SunEC" : "SunRsaSign";
        Signature verifier = Signature.getInstance(algorithm, jdk);
        verifier.initVerify(publicKey);
        verifier.update(message);
        if (!verifier.verify(signature)) {
            throw new IllegalStateException(algorithm + " signature does not verify in " + jdk);
        }
        verifier.initVerify(publicKey);
        verifier.update(message);
        verifier.update((byte) 0);
        if (verifier.verify(signature)) {
            throw new IllegalStateException(algorithm + " signature verifies another message");
        }
        Files.write(Paths.get(signatureFile), signature);
        System.out.println("ok signed " + algorithm + " " + signature.length + " verified by " + jdk);
    }
}
