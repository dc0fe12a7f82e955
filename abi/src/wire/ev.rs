//! The three EV formats and how an EV value maps onto header fields.

use super::Error;

/// How a packet's entropy value (its path) is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EvFormat {
    /// EV in the UDP source port.
    Udp = 0,
    /// Structured EV over the IPv6 flow label and the UDP source port.
    Stev = 1,
    /// SRv6 uSID source route in the outer IPv6 destination.
    Srv6 = 2,
}

impl EvFormat {
    /// All formats, in code order.
    pub const ALL: [EvFormat; 3] = [EvFormat::Udp, EvFormat::Stev, EvFormat::Srv6];

    /// Decode the 2-bit MRH field.
    pub const fn from_code(code: u8) -> Result<Self, Error> {
        match code {
            0 => Ok(EvFormat::Udp),
            1 => Ok(EvFormat::Stev),
            2 => Ok(EvFormat::Srv6),
            c => Err(Error::BadEvFormat(c)),
        }
    }

    /// Lower-case name, as the JSON decoder and the scenarios spell it.
    pub const fn name(self) -> &'static str {
        match self {
            EvFormat::Udp => "udp",
            EvFormat::Stev => "stev",
            EvFormat::Srv6 => "srv6",
        }
    }
}

/// Top nibble of the UDP source port of an STEV packet.
pub const STEV_PORT_PREFIX: u16 = 0xc000;

/// STEV encoding of a 32-bit EV value: (flow label, UDP source port).
pub const fn stev_encode(ev_value: u32) -> (u32, u16) {
    (
        ev_value & 0x000f_ffff,
        STEV_PORT_PREFIX | ((ev_value >> 20) & 0x0fff) as u16,
    )
}

/// STEV decoding: the EV value from the flow label and UDP source port; the port must carry the
/// STEV prefix.
pub const fn stev_decode(flow_label: u32, src_port: u16) -> Result<u32, Error> {
    if src_port & 0xf000 != STEV_PORT_PREFIX {
        return Err(Error::BadStevPort(src_port));
    }
    Ok((flow_label & 0x000f_ffff) | (((src_port & 0x0fff) as u32) << 20))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn stev_round_trip(v in any::<u32>()) {
            let (fl, port) = stev_encode(v);
            prop_assert!(fl < (1 << 20));
            prop_assert_eq!(stev_decode(fl, port), Ok(v));
        }
    }
}
