//! Counters: per port, and fabric totals. Every packet the fabric loses is counted once, with a
//! cause, at the port where it was lost.

/// Why the fabric dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// Output (data) queue full and the packet could not be trimmed: tail drop.
    QueueFull = 0,
    /// Priority (header) queue full.
    HeaderQueueFull = 1,
    /// The link was down when the packet was sent, or went down while it was on the wire, or
    /// took the queue down with it (counted at the sending port). Includes ECMP packets hashed
    /// onto a failed link before routing reconverged.
    LinkDown = 2,
    /// The port a uSID source route names is down (source routes never reroute).
    UsidPortDown = 3,
    /// No route: a uSID naming a port the switch does not have or a route used up at a switch,
    /// an unknown destination host, or no equal-cost port up in the routing view.
    NoRoute = 4,
    /// Lost on a link at random.
    RandomLoss = 5,
    /// Damaged on a link; dropped by the receiving node (bad FCS).
    Corrupt = 6,
    /// The switch is up but drops everything.
    Blackhole = 7,
}

impl DropCause {
    /// Number of causes.
    pub const COUNT: usize = 8;
    /// Every cause, in index order.
    pub const ALL: [DropCause; DropCause::COUNT] = [
        DropCause::QueueFull,
        DropCause::HeaderQueueFull,
        DropCause::LinkDown,
        DropCause::UsidPortDown,
        DropCause::NoRoute,
        DropCause::RandomLoss,
        DropCause::Corrupt,
        DropCause::Blackhole,
    ];

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            DropCause::QueueFull => "queue_full",
            DropCause::HeaderQueueFull => "header_queue_full",
            DropCause::LinkDown => "link_down",
            DropCause::UsidPortDown => "usid_port_down",
            DropCause::NoRoute => "no_route",
            DropCause::RandomLoss => "random_loss",
            DropCause::Corrupt => "corrupt",
            DropCause::Blackhole => "blackhole",
        }
    }
}

/// Counters of one port.
///
/// Laid out for the hot path (`repr(C)`, one cache line first): every hop adds to its ingress
/// port's `rx_*` and its egress port's `tx_*` and `max_queue_bytes`, which share the first
/// line; the rest change when something goes wrong.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C, align(64))]
pub struct PortCounters {
    /// Packets that finished serialization (lost-on-wire ones included).
    pub tx_packets: u64,
    /// Their bytes.
    pub tx_bytes: u64,
    /// Packets received from the link (corrupt ones included).
    pub rx_packets: u64,
    /// Their bytes.
    pub rx_bytes: u64,
    /// Largest data queue seen (bytes).
    pub max_queue_bytes: u64,
    /// Packets marked CE by this port's queue.
    pub ecn_marks: u64,
    /// Packets trimmed by this port's queue.
    pub trims: u64,
    /// Of `tx_packets`, those lost on the wire (random loss, or the link failed under them).
    /// Per link direction: `tx(a) == rx(b) + wire_lost(a)`, in packets and in bytes.
    pub wire_lost_packets: u64,
    /// Their bytes.
    pub wire_lost_bytes: u64,
    /// Drops by [`DropCause`] index.
    pub drops: [u64; DropCause::COUNT],
    /// PFC pauses this (ingress) port sent upstream.
    pub pauses_sent: u64,
    /// PFC pauses this port received (and obeyed).
    pub pauses_received: u64,
}

impl PortCounters {
    /// Drops of one cause.
    pub fn dropped(&self, cause: DropCause) -> u64 {
        self.drops[cause as usize]
    }

    /// Drops of every cause.
    pub fn dropped_total(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Adds `o` into `self` (maxima take the max).
    pub fn add(&mut self, o: &PortCounters) {
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.wire_lost_packets += o.wire_lost_packets;
        self.wire_lost_bytes += o.wire_lost_bytes;
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        for (a, b) in self.drops.iter_mut().zip(o.drops) {
            *a += b;
        }
        self.ecn_marks += o.ecn_marks;
        self.trims += o.trims;
        self.pauses_sent += o.pauses_sent;
        self.pauses_received += o.pauses_received;
        self.max_queue_bytes = self.max_queue_bytes.max(o.max_queue_bytes);
    }
}

/// Fabric-wide totals. Conservation: `injected == delivered + dropped + in_flight`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FabricTotals {
    /// Packets handed to [`crate::fabric::Fabric::inject`] (refused ones included).
    pub injected: u64,
    /// Packets delivered to hosts.
    pub delivered: u64,
    /// Bytes delivered (trimmed packets count their trimmed size).
    pub delivered_bytes: u64,
    /// Drops by cause, over all ports.
    pub drops: [u64; DropCause::COUNT],
    /// Packets inside the fabric now (queued or on a wire).
    pub in_flight: u64,
}

impl FabricTotals {
    /// Drops of every cause.
    pub fn dropped_total(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Drops of one cause.
    pub fn dropped(&self, cause: DropCause) -> u64 {
        self.drops[cause as usize]
    }

    /// True when every injected packet is delivered, dropped with a cause, or still inside.
    pub fn conserved(&self) -> bool {
        self.injected == self.delivered + self.dropped_total() + self.in_flight
    }
}
