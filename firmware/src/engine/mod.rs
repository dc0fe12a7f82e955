//! The MRC engine: the slow path the firmware cores run on coalesced events.
