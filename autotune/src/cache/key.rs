//! Cache keys: what identifies one tuning decision, with a canonical text form and its blake3 hash.

use std::fmt;

use tcc_ir::DType;

use crate::bounds::{BoundsError, MAX_DTYPES, MAX_SHAPES_TEXT, MAX_SHORT_TEXT, check_hex, check_text};

/// The device a measurement was made on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct DeviceKey {
    /// Marketing name (`NVIDIA H100 80GB HBM3`, `AMD EPYC 9B45`).
    pub name: String,
    /// Architecture (`sm_90a`, `x86_64-avx512`): records of the same architecture are borrowed when
    /// this exact device has none.
    pub arch: String,
    /// CUDA compute capability (major, minor), if a GPU.
    pub compute_capability: Option<(u32, u32)>,
    /// Number of SMs, if a GPU.
    pub sm_count: Option<u32>,
}

impl DeviceKey {
    /// Checks every field's bounds.
    pub fn validate(&self) -> Result<(), BoundsError> {
        check_text("device.name", &self.name, MAX_SHORT_TEXT, false)?;
        check_text("device.arch", &self.arch, MAX_SHORT_TEXT, false)?;
        if let Some((major, minor)) = self.compute_capability
            && (major > 99 || minor > 99)
        {
            return Err(BoundsError::new("device.compute_capability", format!("{major}.{minor} is out of range")));
        }
        if let Some(sms) = self.sm_count
            && !(1..=100_000).contains(&sms)
        {
            return Err(BoundsError::new("device.sm_count", format!("{sms} is out of range")));
        }
        Ok(())
    }
}

impl fmt::Display for DeviceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}", self.name, self.arch)?;
        if let Some((major, minor)) = self.compute_capability {
            write!(f, ", cc {major}.{minor}")?;
        }
        if let Some(sms) = self.sm_count {
            write!(f, ", {sms} SMs")?;
        }
        f.write_str(")")
    }
}

/// Everything that identifies one tuning decision.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct CacheKey {
    /// The kernel's fingerprint (the IR's stable hash), lowercase hex.
    pub fingerprint: String,
    /// The bound shapes in the caller's canonical text (`x=[128,4096] w=[4096,4096]`).
    pub shapes: String,
    /// Element types of the kernel's inputs and outputs, in order.
    pub dtypes: Vec<DType>,
    /// The compilation target (`cpu:cranelift`, `sm_90a`).
    pub target: String,
    /// The device measured on.
    pub device: DeviceKey,
}

/// A 64-digit lowercase hex blake3 hash naming a key (or a key's architecture or kernel part).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct KeyHash(String);

impl KeyHash {
    /// Parses a full 64-digit lowercase hex hash.
    pub fn parse(text: &str) -> Option<KeyHash> {
        let ok = text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| KeyHash(text.to_string()))
    }

    /// The hash of a canonical text.
    pub fn of_text(text: &str) -> KeyHash {
        KeyHash(blake3::hash(text.as_bytes()).to_hex().to_string())
    }

    /// The hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl CacheKey {
    /// Checks every field's bounds.
    pub fn validate(&self) -> Result<(), BoundsError> {
        check_hex("key.fingerprint", &self.fingerprint)?;
        check_text("key.shapes", &self.shapes, MAX_SHAPES_TEXT, true)?;
        if self.dtypes.len() > MAX_DTYPES {
            return Err(BoundsError::new(
                "key.dtypes",
                format!("{} dtypes, more than {MAX_DTYPES}", self.dtypes.len()),
            ));
        }
        check_text("key.target", &self.target, MAX_SHORT_TEXT, false)?;
        self.device.validate()
    }

    fn kernel_lines(&self) -> String {
        let dtypes: Vec<&str> = self.dtypes.iter().map(|d| d.name()).collect();
        format!(
            "fingerprint {}\nshapes {}\ndtypes {}\ntarget {}\n",
            self.fingerprint,
            self.shapes,
            dtypes.join(","),
            self.target
        )
    }

    /// The canonical text form: one `name value` line per field, in a fixed order. Field values
    /// hold no control characters (see [`CacheKey::validate`]), so the form is unambiguous.
    pub fn canonical_text(&self) -> String {
        let cc = self.device.compute_capability.map_or("-".to_string(), |(a, b)| format!("{a}.{b}"));
        let sms = self.device.sm_count.map_or("-".to_string(), |n| n.to_string());
        format!(
            "tcc-cache-key/1\n{}device.name {}\ndevice.arch {}\ndevice.cc {cc}\ndevice.sm {sms}\n",
            self.kernel_lines(),
            self.device.name,
            self.device.arch
        )
    }

    /// blake3 of [`CacheKey::canonical_text`]: the key's name in every store.
    pub fn hash(&self) -> KeyHash {
        KeyHash::of_text(&self.canonical_text())
    }

    /// blake3 of the key without the device's name, compute capability and SM count: equal for the
    /// same kernel on any device of the same architecture (the borrowing fallback).
    pub fn arch_hash(&self) -> KeyHash {
        KeyHash::of_text(&format!("tcc-cache-arch/1\n{}device.arch {}\n", self.kernel_lines(), self.device.arch))
    }

    /// blake3 of the key without any device field: equal for the same kernel on every device (the
    /// lockfile matches on it).
    pub fn kernel_hash(&self) -> KeyHash {
        KeyHash::of_text(&format!("tcc-cache-kernel/1\n{}", self.kernel_lines()))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn h100() -> DeviceKey {
        DeviceKey {
            name: "NVIDIA H100 80GB HBM3".into(),
            arch: "sm_90a".into(),
            compute_capability: Some((9, 0)),
            sm_count: Some(132),
        }
    }

    pub(crate) fn key() -> CacheKey {
        CacheKey {
            fingerprint: "00112233445566778899aabbccddeeff".into(),
            shapes: "x=[128,4096]".into(),
            dtypes: vec![DType::F16, DType::F32],
            target: "sm_90a".into(),
            device: h100(),
        }
    }

    #[test]
    fn canonical_text_is_fixed() {
        assert_eq!(
            key().canonical_text(),
            "tcc-cache-key/1\nfingerprint 00112233445566778899aabbccddeeff\nshapes x=[128,4096]\n\
             dtypes f16,f32\ntarget sm_90a\ndevice.name NVIDIA H100 80GB HBM3\ndevice.arch sm_90a\n\
             device.cc 9.0\ndevice.sm 132\n"
        );
        assert_eq!(key().hash(), KeyHash::of_text(&key().canonical_text()));
        assert_eq!(key().hash().as_str().len(), 64);
    }

    #[test]
    fn hashes_separate_what_they_should() {
        let a = key();
        let mut b = key();
        b.device.name = "NVIDIA H100 PCIe".into();
        b.device.sm_count = Some(114);
        assert_ne!(a.hash(), b.hash());
        assert_eq!(a.arch_hash(), b.arch_hash());
        assert_eq!(a.kernel_hash(), b.kernel_hash());
        let mut c = key();
        c.device.arch = "sm_80".into();
        assert_ne!(a.arch_hash(), c.arch_hash());
        assert_eq!(a.kernel_hash(), c.kernel_hash());
        let mut d = key();
        d.shapes = "x=[256,4096]".into();
        assert_ne!(a.kernel_hash(), d.kernel_hash());
    }

    #[test]
    fn validation() {
        assert_eq!(key().validate(), Ok(()));
        let mut k = key();
        k.target = "sm_90a\ndevice.name other".into();
        assert!(k.validate().is_err());
        let mut k = key();
        k.fingerprint = "xyz".into();
        assert!(k.validate().is_err());
        let mut k = key();
        k.device.sm_count = Some(0);
        assert!(k.validate().is_err());
    }

    #[test]
    fn key_hash_parse() {
        let h = key().hash();
        assert_eq!(KeyHash::parse(h.as_str()), Some(h.clone()));
        assert_eq!(KeyHash::parse(&h.as_str()[..10]), None);
        assert_eq!(KeyHash::parse(&h.as_str().to_uppercase()), None);
    }
}
