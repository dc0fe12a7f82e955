//! **TEST-ONLY** Ed25519 key. Its seed is public in this repository: anyone can sign images
//! with it. Production devices must be provisioned with another public key; the image refuses
//! nothing on that account by itself, so never ship `PUBLIC_KEY` in a product.

/// **TEST ONLY**: the signing seed (32 bytes, "mrc test-only fw signing key!!!!").
pub const SEED: [u8; 32] = *b"mrc test-only fw signing key!!!!";

/// **TEST ONLY**: the public key of [`SEED`].
pub const PUBLIC_KEY: [u8; 32] = [
    77, 238, 209, 99, 234, 201, 120, 75, 168, 127, 161, 138, 16, 228, 118, 222, 140, 232, 109, 224,
    88, 221, 169, 170, 27, 131, 135, 11, 43, 246, 116, 223,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_key_matches_seed() {
        let kp = ed25519_compact::KeyPair::from_seed(ed25519_compact::Seed::new(SEED));
        assert_eq!(*kp.pk, PUBLIC_KEY, "{:?}", *kp.pk);
    }
}
