//! A/B slots with a boot counter and rollback.
//!
//! [`BootControl`] is the small record the boot path keeps in its own flash sector. Rules:
//! - A freshly written, verified image enters its slot as `Trial { boots: 0 }` and becomes the
//!   preferred slot ([`BootControl::mark_trial`]); the running slot stays `Confirmed`.
//! - [`BootControl::select_boot`] runs once per reset, **before** the image starts, and the
//!   record is written back at once: a trial slot is booted at most `max_trial_boots` times.
//!   When it has used them all without [`BootControl::confirm`], it becomes `Invalid` and the
//!   other, confirmed slot boots again: a rollback.
//! - The image confirms itself once it is healthy (self-test passed, host handshake done).
//!
//! The record serialises to 32 bytes with a magic and a CRC ([`BootControl::to_bytes`]); a torn
//! or blank record is refused by [`BootControl::from_bytes`] with a reason, and the caller falls
//! back to [`BootControl::factory`].

use crate::crc32::crc32;

/// One of the two image slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Slot {
    /// Slot A.
    A,
    /// Slot B.
    B,
}

impl Slot {
    /// The other slot.
    pub const fn other(self) -> Slot {
        match self {
            Slot::A => Slot::B,
            Slot::B => Slot::A,
        }
    }

    const fn index(self) -> usize {
        match self {
            Slot::A => 0,
            Slot::B => 1,
        }
    }
}

/// What a slot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SlotState {
    /// Nothing (erased, or an update in progress).
    Empty,
    /// Refused or rolled back: never booted again until rewritten.
    Invalid,
    /// Verified, not yet confirmed; booted `boots` times so far.
    Trial {
        /// Boots used.
        boots: u8,
    },
    /// Confirmed by the image itself.
    Confirmed,
}

/// A slot's state and image version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SlotInfo {
    /// State.
    pub state: SlotState,
    /// Image version from the header (0 when empty).
    pub image_version: u32,
}

impl SlotInfo {
    const EMPTY: SlotInfo = SlotInfo {
        state: SlotState::Empty,
        image_version: 0,
    };
}

/// What to boot after a reset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BootDecision {
    /// Boot `slot`; `trial` when it still has to confirm itself.
    Boot {
        /// The slot.
        slot: Slot,
        /// Whether this is a trial boot (boot counter incremented).
        trial: bool,
    },
    /// The trial image in `from` used its boots without confirming: boot `to` instead.
    RolledBack {
        /// The slot given up on (now `Invalid`).
        from: Slot,
        /// The confirmed slot booted.
        to: Slot,
    },
    /// Neither slot holds a bootable image.
    NoBootableImage,
}

/// Why a boot-control operation was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ControlError {
    /// The stored record does not start with the magic (blank or foreign sector).
    BadMagic,
    /// The stored record's CRC does not match (torn write).
    BadCrc {
        /// CRC stored.
        stored: u32,
        /// CRC computed.
        computed: u32,
    },
    /// A state byte out of range.
    BadState {
        /// The byte.
        byte: u8,
    },
    /// `confirm` for a slot that is not on trial.
    NotOnTrial {
        /// The slot named.
        slot: Slot,
        /// Its state.
        state: SlotState,
    },
    /// Writing the slot the core is running from.
    SlotIsRunning {
        /// The slot.
        slot: Slot,
    },
}

const CONTROL_MAGIC: [u8; 4] = *b"MRBC";
/// Serialised size of a [`BootControl`].
pub const CONTROL_LEN: usize = 32;

/// The A/B boot record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BootControl {
    slots: [SlotInfo; 2],
    preferred: Slot,
    max_trial_boots: u8,
    /// Rollbacks performed, for `fw status`.
    rollbacks: u16,
}

impl BootControl {
    /// A factory record: slot A confirmed with `image_version`, slot B empty.
    pub const fn factory(image_version: u32, max_trial_boots: u8) -> Self {
        BootControl {
            slots: [
                SlotInfo {
                    state: SlotState::Confirmed,
                    image_version,
                },
                SlotInfo::EMPTY,
            ],
            preferred: Slot::A,
            max_trial_boots,
            rollbacks: 0,
        }
    }

    /// A slot's state and version.
    pub fn slot(&self, slot: Slot) -> SlotInfo {
        self.slots[slot.index()]
    }

    /// The slot the next boot tries first.
    pub const fn preferred(&self) -> Slot {
        self.preferred
    }

    /// Rollbacks so far.
    pub const fn rollbacks(&self) -> u16 {
        self.rollbacks
    }

    /// The slot an update writes to while running from `running`.
    pub const fn update_target(running: Slot) -> Slot {
        running.other()
    }

    /// Decide what boots after a reset; persist the record before jumping.
    pub fn select_boot(&mut self) -> BootDecision {
        let p = self.preferred;
        let other = p.other();
        match self.slots[p.index()].state {
            SlotState::Confirmed => BootDecision::Boot {
                slot: p,
                trial: false,
            },
            SlotState::Trial { boots } if boots < self.max_trial_boots => {
                self.slots[p.index()].state = SlotState::Trial { boots: boots + 1 };
                BootDecision::Boot {
                    slot: p,
                    trial: true,
                }
            }
            SlotState::Trial { .. } => {
                self.slots[p.index()].state = SlotState::Invalid;
                self.rollbacks = self.rollbacks.saturating_add(1);
                if self.slots[other.index()].state == SlotState::Confirmed {
                    self.preferred = other;
                    BootDecision::RolledBack { from: p, to: other }
                } else {
                    BootDecision::NoBootableImage
                }
            }
            SlotState::Empty | SlotState::Invalid => {
                if self.slots[other.index()].state == SlotState::Confirmed {
                    self.preferred = other;
                    BootDecision::Boot {
                        slot: other,
                        trial: false,
                    }
                } else {
                    BootDecision::NoBootableImage
                }
            }
        }
    }

    /// An update into `slot` started: the slot is `Empty` until verified.
    ///
    /// # Errors
    /// [`ControlError::SlotIsRunning`] when `slot` is the one running.
    pub fn begin_write(&mut self, slot: Slot, running: Slot) -> Result<(), ControlError> {
        if slot == running {
            return Err(ControlError::SlotIsRunning { slot });
        }
        self.slots[slot.index()] = SlotInfo::EMPTY;
        if self.preferred == slot {
            self.preferred = running;
        }
        Ok(())
    }

    /// A verified image of `image_version` is in `slot`: boot it next, on trial.
    pub fn mark_trial(&mut self, slot: Slot, image_version: u32) {
        self.slots[slot.index()] = SlotInfo {
            state: SlotState::Trial { boots: 0 },
            image_version,
        };
        self.preferred = slot;
    }

    /// The written image in `slot` was refused.
    pub fn mark_invalid(&mut self, slot: Slot) {
        self.slots[slot.index()].state = SlotState::Invalid;
    }

    /// The running trial image declares itself healthy.
    ///
    /// # Errors
    /// [`ControlError::NotOnTrial`] when `slot` is not on trial.
    pub fn confirm(&mut self, slot: Slot) -> Result<(), ControlError> {
        match self.slots[slot.index()].state {
            SlotState::Trial { .. } => {
                self.slots[slot.index()].state = SlotState::Confirmed;
                self.preferred = slot;
                Ok(())
            }
            state => Err(ControlError::NotOnTrial { slot, state }),
        }
    }

    /// The 32-byte record: magic, per slot (state, boots, version), preferred, max, rollbacks,
    /// CRC-32 of bytes 0..28 at 28.
    pub fn to_bytes(&self) -> [u8; CONTROL_LEN] {
        let mut b = [0u8; CONTROL_LEN];
        b[0..4].copy_from_slice(&CONTROL_MAGIC);
        for (i, s) in self.slots.iter().enumerate() {
            let at = 4 + i * 6;
            let (state, boots) = match s.state {
                SlotState::Empty => (0, 0),
                SlotState::Invalid => (1, 0),
                SlotState::Trial { boots } => (2, boots),
                SlotState::Confirmed => (3, 0),
            };
            b[at] = state;
            b[at + 1] = boots;
            b[at + 2..at + 6].copy_from_slice(&s.image_version.to_le_bytes());
        }
        b[16] = self.preferred.index() as u8;
        b[17] = self.max_trial_boots;
        b[18..20].copy_from_slice(&self.rollbacks.to_le_bytes());
        let crc = crc32(&b[..28]);
        b[28..32].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Read a record written by [`BootControl::to_bytes`].
    ///
    /// # Errors
    /// [`ControlError::BadMagic`], [`ControlError::BadCrc`] or [`ControlError::BadState`].
    pub fn from_bytes(b: &[u8; CONTROL_LEN]) -> Result<Self, ControlError> {
        if b[0..4] != CONTROL_MAGIC {
            return Err(ControlError::BadMagic);
        }
        let stored = u32::from_le_bytes([b[28], b[29], b[30], b[31]]);
        let computed = crc32(&b[..28]);
        if stored != computed {
            return Err(ControlError::BadCrc { stored, computed });
        }
        let mut slots = [SlotInfo::EMPTY; 2];
        for (i, s) in slots.iter_mut().enumerate() {
            let at = 4 + i * 6;
            s.state = match b[at] {
                0 => SlotState::Empty,
                1 => SlotState::Invalid,
                2 => SlotState::Trial { boots: b[at + 1] },
                3 => SlotState::Confirmed,
                byte => return Err(ControlError::BadState { byte }),
            };
            s.image_version = u32::from_le_bytes([b[at + 2], b[at + 3], b[at + 4], b[at + 5]]);
        }
        let preferred = match b[16] {
            0 => Slot::A,
            1 => Slot::B,
            byte => return Err(ControlError::BadState { byte }),
        };
        Ok(BootControl {
            slots,
            preferred,
            max_trial_boots: b[17],
            rollbacks: u16::from_le_bytes([b[18], b[19]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unconfirmed_image_rolls_back_after_its_boots() {
        let mut c = BootControl::factory(1, 3);
        c.begin_write(Slot::B, Slot::A).unwrap();
        c.mark_trial(Slot::B, 2);
        for _ in 0..3 {
            assert_eq!(
                c.select_boot(),
                BootDecision::Boot {
                    slot: Slot::B,
                    trial: true
                }
            );
            // The record survives every reset.
            c = BootControl::from_bytes(&c.to_bytes()).unwrap();
        }
        assert_eq!(
            c.select_boot(),
            BootDecision::RolledBack {
                from: Slot::B,
                to: Slot::A
            }
        );
        assert_eq!(c.slot(Slot::B).state, SlotState::Invalid);
        assert_eq!(c.rollbacks(), 1);
        assert_eq!(
            c.select_boot(),
            BootDecision::Boot {
                slot: Slot::A,
                trial: false
            }
        );
    }

    #[test]
    fn confirmed_image_stays() {
        let mut c = BootControl::factory(1, 2);
        c.mark_trial(Slot::B, 2);
        assert!(matches!(
            c.select_boot(),
            BootDecision::Boot { trial: true, .. }
        ));
        c.confirm(Slot::B).unwrap();
        for _ in 0..10 {
            assert_eq!(
                c.select_boot(),
                BootDecision::Boot {
                    slot: Slot::B,
                    trial: false
                }
            );
        }
        assert_eq!(c.slot(Slot::A).state, SlotState::Confirmed);
        assert_eq!(
            c.confirm(Slot::A),
            Err(ControlError::NotOnTrial {
                slot: Slot::A,
                state: SlotState::Confirmed
            })
        );
    }

    #[test]
    fn running_slot_cannot_be_overwritten() {
        let mut c = BootControl::factory(1, 2);
        assert_eq!(
            c.begin_write(Slot::A, Slot::A),
            Err(ControlError::SlotIsRunning { slot: Slot::A })
        );
    }

    #[test]
    fn torn_record_is_refused() {
        let c = BootControl::factory(9, 3);
        let mut b = c.to_bytes();
        b[8] ^= 1;
        assert!(matches!(
            BootControl::from_bytes(&b),
            Err(ControlError::BadCrc { .. })
        ));
        assert_eq!(
            BootControl::from_bytes(&[0xFF; CONTROL_LEN]),
            Err(ControlError::BadMagic)
        );
        assert_eq!(BootControl::from_bytes(&c.to_bytes()), Ok(c));
    }

    #[test]
    fn no_bootable_image_is_reported() {
        let mut c = BootControl::factory(1, 1);
        c.mark_invalid(Slot::A);
        assert_eq!(c.select_boot(), BootDecision::NoBootableImage);
    }
}
