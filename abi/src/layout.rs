//! Layout tables: every device structure, register block and wire header as data, from which
//! `fpga-rtl/generated/mrc_abi_pkg.sv` and `abi/REGISTERS.md` are generated (see [`crate::gen`]).
//!
//! Device structures (little-endian) get their table from the same macro that defines the Rust
//! struct, so names, offsets, widths and docs cannot drift: offsets come from `offset_of!`, widths
//! from `size_of`, docs from the field's doc comment. Wire headers (big-endian, `abi/WIRE.md`)
//! are written here as bit tables. Every table is checked at compile time to cover its structure
//! exactly, field after field, without gaps or overlaps.
//!
//! Bit numbering: for [`Endian::Little`] layouts bit 0 is the least significant bit of byte 0
//! (the structure read as one little-endian number); for [`Endian::Big`] layouts bit 0 is the most
//! significant bit of byte 0 (the first bit on the wire).

mod constants;
mod tables;
mod wire;

pub use constants::{CONSTANTS, ENUMS};
pub use tables::{LAYOUTS, REGISTER_BLOCKS};
pub use wire::WIRE_LAYOUTS;

/// Byte order of a layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endian {
    /// Network order (wire headers).
    Big,
    /// Little-endian (everything shared over PCIe and between datapath and firmware).
    Little,
}

/// One field of a layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field name (snake_case).
    pub name: &'static str,
    /// First bit (see the module docs for the numbering).
    pub offset_bits: u32,
    /// Width in bits.
    pub width_bits: u32,
    /// What it means.
    pub doc: &'static str,
}

impl Field {
    /// A field.
    pub const fn new(
        name: &'static str,
        offset_bits: u32,
        width_bits: u32,
        doc: &'static str,
    ) -> Self {
        Field {
            name,
            offset_bits,
            width_bits,
            doc,
        }
    }
}

/// A structure, register block or header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Name (the Rust type name, or the header name for wire headers).
    pub name: &'static str,
    /// Size in bytes.
    pub size_bytes: u32,
    /// Byte order.
    pub endian: Endian,
    /// What it is.
    pub doc: &'static str,
    /// Fields in bit order, covering the layout exactly.
    pub fields: &'static [Field],
}

impl Layout {
    /// True when the fields are sorted, contiguous, non-empty and cover exactly `size_bytes * 8`
    /// bits.
    pub const fn is_well_formed(&self) -> bool {
        let mut next = 0u32;
        let mut i = 0;
        while i < self.fields.len() {
            let f = &self.fields[i];
            if f.offset_bits != next || f.width_bits == 0 {
                return false;
            }
            next += f.width_bits;
            i += 1;
        }
        next == self.size_bytes * 8
    }

    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// A named constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Constant {
    /// Group (snake_case), e.g. `bth_opcode`.
    pub group: &'static str,
    /// Name (UPPER_SNAKE_CASE), unique in its group.
    pub name: &'static str,
    /// Value.
    pub value: u64,
    /// What it means.
    pub doc: &'static str,
}

/// A constant group that is an enumeration (generated as a SystemVerilog `typedef enum`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnumGroup {
    /// The constant group.
    pub group: &'static str,
    /// Width of the field that holds it.
    pub width_bits: u32,
    /// What it enumerates.
    pub doc: &'static str,
}

/// A register block type and its layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegisterBlockInfo {
    /// Block type code.
    pub block_type: u16,
    /// Block name.
    pub name: &'static str,
    /// Register layout.
    pub layout: &'static Layout,
    /// BAR0 offset in the reference device.
    pub default_offset: u32,
}

/// Defines a `#[repr(C)]` little-endian zerocopy struct and its `LAYOUT` table from one text.
///
/// Every field needs a doc comment; the struct gets `Clone, Copy, Debug, PartialEq, Eq,
/// FromBytes, IntoBytes, KnownLayout, Immutable`. A leading `#[align(N)]` aligns the struct
/// to `N` bytes (the byte layout is the same; its fields are then read and copied a word at a
/// time where their offsets allow, which a 32-bit core without unaligned access needs).
macro_rules! le_struct {
    (
        #[align($a:literal)]
        $(#[doc = $sd:literal])*
        pub struct $name:ident {
            $( $(#[doc = $d:literal])* pub $f:ident : $t:ty ),* $(,)?
        }
    ) => {
        $crate::layout::le_struct! {
            @repr(C, align($a))
            $(#[doc = $sd])*
            pub struct $name {
                $( $(#[doc = $d])* pub $f: $t, )*
            }
        }
    };
    (
        $(#[doc = $sd:literal])*
        pub struct $name:ident {
            $( $(#[doc = $d:literal])* pub $f:ident : $t:ty ),* $(,)?
        }
    ) => {
        $crate::layout::le_struct! {
            @repr(C)
            $(#[doc = $sd])*
            pub struct $name {
                $( $(#[doc = $d])* pub $f: $t, )*
            }
        }
    };
    (
        @repr($($r:tt)*)
        $(#[doc = $sd:literal])*
        pub struct $name:ident {
            $( $(#[doc = $d:literal])* pub $f:ident : $t:ty ),* $(,)?
        }
    ) => {
        $(#[doc = $sd])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq,
            zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::KnownLayout, zerocopy::Immutable,
        )]
        #[repr($($r)*)]
        pub struct $name {
            $( $(#[doc = $d])* pub $f: $t, )*
        }

        impl $name {
            /// The layout table of this structure (for generated RTL and docs).
            pub const LAYOUT: $crate::layout::Layout = $crate::layout::Layout {
                name: stringify!($name),
                size_bytes: core::mem::size_of::<$name>() as u32,
                endian: $crate::layout::Endian::Little,
                doc: concat!($($sd, " "),*),
                fields: &[$(
                    $crate::layout::Field {
                        name: stringify!($f),
                        offset_bits: (core::mem::offset_of!($name, $f) * 8) as u32,
                        width_bits: (core::mem::size_of::<$t>() * 8) as u32,
                        doc: concat!($($d, " "),*),
                    },
                )*],
            };
        }

        const _: () = assert!($name::LAYOUT.is_well_formed());
    };
}
pub(crate) use le_struct;

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::device::admin::{
        AdminStatus, EvProfileKind, EvProfileState, FwUpdateState, Opcode, QpState,
    };
    use crate::device::cqe::{CqeOpcode, CqeStatus};
    use crate::device::event::{CqErrorReason, EventKind, FwEventCode};
    use crate::device::{csr::CsrKind, regs::BlockType, wqe::SendOpcode, EvFormat, EvState};
    use std::collections::BTreeSet;
    use std::format;
    use std::string::String;

    fn upper_snake(camel: &str) -> String {
        let mut out = String::new();
        for (i, c) in camel.chars().enumerate() {
            if c.is_ascii_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_uppercase());
        }
        out
    }

    fn group(g: &str) -> BTreeSet<(String, u64)> {
        CONSTANTS
            .iter()
            .filter(|c| c.group == g)
            .map(|c| (String::from(c.name), c.value))
            .collect()
    }

    fn rust<T: core::fmt::Debug>(all: impl Iterator<Item = (T, u64)>) -> BTreeSet<(String, u64)> {
        all.map(|(v, c)| (upper_snake(&format!("{v:?}")), c))
            .collect()
    }

    #[test]
    fn enum_groups_match_the_rust_enums() {
        macro_rules! check {
            ($g:literal, $ty:ty, $from:expr) => {
                let want =
                    rust((0..=0xFFFFu32).filter_map(|v| $from(v).map(|x: $ty| (x, v as u64))));
                assert_eq!(group($g), want, "group {}", $g);
            };
        }
        check!("block_type", BlockType, |v: u32| BlockType::from_u16(
            v as u16
        )
        .filter(|_| v <= 0xFFFF));
        check!("send_opcode", SendOpcode, |v: u32| u8::try_from(v)
            .ok()
            .and_then(SendOpcode::from_u8));
        check!("cqe_status", CqeStatus, |v: u32| u8::try_from(v)
            .ok()
            .and_then(CqeStatus::from_u8));
        check!("cqe_opcode", CqeOpcode, |v: u32| u8::try_from(v)
            .ok()
            .and_then(CqeOpcode::from_u8));
        check!("event_kind", EventKind, |v: u32| u8::try_from(v)
            .ok()
            .and_then(EventKind::from_u8));
        check!("fw_event", FwEventCode, |v: u32| u8::try_from(v)
            .ok()
            .and_then(FwEventCode::from_u8));
        check!("ev_state", EvState, |v: u32| u8::try_from(v)
            .ok()
            .and_then(EvState::from_u8));
        check!("admin_opcode", Opcode, |v: u32| u8::try_from(v)
            .ok()
            .and_then(Opcode::from_code));
        check!("admin_status", AdminStatus, |v: u32| u8::try_from(v)
            .ok()
            .and_then(AdminStatus::from_code));
        check!("qp_state", QpState, |v: u32| u8::try_from(v)
            .ok()
            .and_then(QpState::from_code));
        check!("ev_profile_kind", EvProfileKind, |v: u32| u8::try_from(v)
            .ok()
            .and_then(EvProfileKind::from_code));
        check!("ev_profile_state", EvProfileState, |v: u32| u8::try_from(v)
            .ok()
            .and_then(EvProfileState::from_code));
        check!("fw_update_state", FwUpdateState, |v: u32| u8::try_from(v)
            .ok()
            .and_then(FwUpdateState::from_code));
        check!("csr_kind", CsrKind, |v: u32| u8::try_from(v)
            .ok()
            .and_then(CsrKind::from_u8));
        check!("i2c_err", crate::device::i2c::ErrCause, |v: u32| {
            crate::device::i2c::ErrCause::from_u32(v)
        });
        let cq: BTreeSet<_> = [
            ("OVERFLOW", CqErrorReason::Overflow),
            ("ACCESS_ERROR", CqErrorReason::AccessError),
        ]
        .into_iter()
        .map(|(n, v)| (String::from(n), v as u64))
        .collect();
        assert_eq!(group("cq_error_reason"), cq);
        let ev = rust(EvFormat::ALL.into_iter().map(|e| (e, e as u64)));
        assert_eq!(group("ev_format"), ev);
    }

    #[test]
    fn tables_are_consistent() {
        let mut names = BTreeSet::new();
        for l in LAYOUTS.iter().chain(WIRE_LAYOUTS) {
            assert!(l.is_well_formed(), "{}", l.name);
            assert!(names.insert(l.name), "duplicate layout {}", l.name);
            let mut fields = BTreeSet::new();
            for f in l.fields {
                assert!(fields.insert(f.name), "{}.{} twice", l.name, f.name);
                assert!(!f.doc.trim().is_empty(), "{}.{} has no doc", l.name, f.name);
            }
        }
        let mut seen = BTreeSet::new();
        for c in CONSTANTS {
            assert!(
                seen.insert((c.group, c.name)),
                "constant {}.{} twice",
                c.group,
                c.name
            );
        }
        for e in ENUMS {
            let g = group(e.group);
            assert!(!g.is_empty(), "enum group {} has no constants", e.group);
            let bits = e.width_bits;
            for (n, v) in g {
                assert!(
                    bits >= 64 || v < (1u64 << bits),
                    "{}.{} does not fit {} bits",
                    e.group,
                    n,
                    e.width_bits
                );
            }
        }
        for b in REGISTER_BLOCKS {
            assert_eq!(
                crate::device::regs::block_size(BlockType::from_u16(b.block_type).unwrap()),
                b.layout.size_bytes
            );
        }
        // Sizes of WIRE.md.
        let size = |n: &str| {
            WIRE_LAYOUTS
                .iter()
                .find(|l| l.name == n)
                .unwrap()
                .size_bytes
        };
        assert_eq!(
            size("Ethernet")
                + 2 * size("Ipv6")
                + size("Udp")
                + size("Bth")
                + size("Mrh")
                + size("Evx")
                + size("Tsx")
                + size("Reth"),
            150
        );
        assert_eq!(
            crate::device::wqe::SendWqe::LAYOUT
                .field("sge")
                .unwrap()
                .offset_bits,
            256
        );
    }
}
