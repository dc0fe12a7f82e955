//! The simulated NIC host interface: the device side of the driver's [`Backend`] contract.
//!
//! Each [`SimNic`] is a [`Twin`] (BAR0, DMA by IOVA, interrupts) with the reference register
//! map ([`write_default_map`]) and MMIO hooks that make it behave like an MRC NIC's host
//! interface, functionally and untimed:
//!
//! - DEVICE `control.RESET` clears every table and sets `status.READY`.
//! - The admin queue: commands are fetched by DMA, decoded and validated by
//!   [`AdminCmd::decode`], executed by the NIC image's executor (`mrc_firmware::admin`)
//!   against its PD / MR / CQ / QP / profile tables and the port state (with the checks a NIC
//!   makes: objects exist, belong together, are not in use, states allow it, DMA addresses are
//!   mapped), and answered in the response ring; firmware update commands go to the `firmware`
//!   module (with `SimHost::with_elf_firmware`, feature `elf`: to the `mrc-nic` ELF on an
//!   emulated core, which runs its own update path).
//! - The event queue carries port, QP, CQ and EV events.
//! - Doorbell pages: a send doorbell hands the QP's new WQEs (their SGEs checked against the
//!   NIC's MRs) to the NIC model, which moves them over the fabric to the NIC whose address
//!   ([`default_gid`]) equals the QP's remote address (another [`SimNic`] of the same
//!   [`SimHost`] or the same NIC), into the registered memory named by the rkey;
//!   Write-with-Immediate consumes the responder's next receive and completes it with the
//!   immediate, in posting order. Every fault a NIC reports (bad lkey, rkey, range, missing
//!   receive, unknown QP) becomes an error completion, the QP moves to ERROR and a `QpFatal`
//!   event is posted.
//! - [`SimNic::surprise_remove`]: every later MMIO read returns all ones, writes are dropped.
//!
//! Every NIC's device side runs on the simulator's one NIC model
//! ([`crate::nic::Nic::for_driver`]: the datapath stage and the NIC image's main loop on timed
//! cores, PCIe at TLP granularity) on a multi-plane Clos fabric ([`crate::fabric`];
//! [`SimHost::new`] the default one, [`SimHost::on_clos`] any), in virtual time that each
//! doorbell advances until the NICs are idle and the fabric empty (`clos` module). Fault
//! windows (planes, cables, blackholing spines and links), slow DMA and injected frames are in
//! the `faults` module; a cable pull, [`SimNic::set_link`], takes the NIC's link to that plane
//! down.
//!
//! Defaults (documented device behaviour): EV profile 0 and CC profile 0 mean the device
//! defaults (an AUTO UDP profile of `max_evs_per_qp` EVs and the default NSCC parameters).

mod admin;
mod clos;
mod datapath;
mod faults;
pub mod firmware;
#[cfg(feature = "elf")]
mod firmware_elf;
mod state;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use mrc_abi::device::admin::AdminCmd;
use mrc_abi::device::regs::{caps, default_bar_len, defaults, write_default_map, DeviceParams};
use mrc_driver::device::{default_gid, SharedBackend};
use mrc_driver::sys::twin::{MmioWrite, Twin, TwinConfig};
use mrc_driver::sys::{Backend, Bdf};

pub use clos::{ClosConfig, ClosCounters};
pub use faults::{InjectCounters, RxOutcome, WindowKind};
pub use mrc_firmware::datapath::stage::DatapathCounters;
pub use mrc_firmware::engine::EngineCounters;
pub use state::NicCounters;
use state::NicState;

/// Shape of a simulated NIC.
#[derive(Clone, Debug)]
pub struct SimNicConfig {
    /// PCI address (its NIC address follows from it).
    pub bdf: Bdf,
    /// Register-visible parameters.
    pub params: DeviceParams,
    /// Interrupt vectors.
    pub vectors: u32,
}

impl SimNicConfig {
    /// The default NIC at `0000:00:<device>.0`: 4 ports on 4 planes, 64 QPs and CQs, 256 EVs
    /// per QP, every capability (firmware update: see [`firmware`]).
    pub fn numbered(device: u8) -> SimNicConfig {
        SimNicConfig {
            bdf: Bdf::new(0, 0, device & 31, 0).unwrap_or_default(),
            params: DeviceParams {
                device_id: mrc_abi::device::regs::PCI_ID,
                capabilities: caps::ALL,
                num_ports: 4,
                num_planes: 4,
                max_qps: 64,
                max_cqs: 64,
                max_evs_per_qp: 256,
                doorbell_pages: 64,
            },
            vectors: 4,
        }
    }
}

/// Several simulated NICs that reach each other over a Clos fabric.
pub struct SimHost {
    nics: Vec<SimNic>,
    world: Arc<Mutex<World>>,
}

/// Everything the NICs of a host share: their device-side state.
pub(crate) struct World {
    pub nics: Vec<NicState>,
    pub now_ns: u64,
    /// Per NIC: flash, boot record and update session (kept across device resets).
    pub fw: Vec<firmware::FwNic>,
    /// The NIC model on its Clos fabric (module `clos`).
    pub clos: Box<clos::Clos>,
}

fn lock(m: &Mutex<World>) -> MutexGuard<'_, World> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One simulated NIC.
#[derive(Clone)]
pub struct SimNic {
    twin: Arc<Twin>,
    index: usize,
    world: Arc<Mutex<World>>,
    removed: Arc<AtomicBool>,
}

impl std::fmt::Debug for SimNic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimNic")
            .field("bdf", &self.twin.bdf())
            .field("removed", &self.removed.load(Ordering::Relaxed))
            .finish()
    }
}

/// Why a simulated host could not be built.
#[derive(Debug)]
pub enum SimError {
    /// The twin backend failed.
    Sys(mrc_driver::sys::Error),
    /// The Clos fabric or a NIC model could not be built.
    Clos(String),
    /// The NIC image could not be built, read or booted (`elf` firmware level).
    Firmware(String),
    /// The parameters describe no valid register map.
    BadParams {
        /// The NIC.
        bdf: Bdf,
    },
}

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SimError::Sys(e) => write!(f, "{e}"),
            SimError::Clos(e) => write!(f, "Clos fabric: {e}"),
            SimError::Firmware(e) => write!(f, "NIC firmware: {e}"),
            SimError::BadParams { bdf } => {
                write!(
                    f,
                    "NIC {bdf}: parameters do not fit the reference register map"
                )
            }
        }
    }
}

impl std::error::Error for SimError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SimError::Sys(e) => Some(e),
            SimError::BadParams { .. } | SimError::Clos(_) | SimError::Firmware(_) => None,
        }
    }
}

impl From<mrc_driver::sys::Error> for SimError {
    fn from(e: mrc_driver::sys::Error) -> Self {
        SimError::Sys(e)
    }
}

impl SimHost {
    /// A host with one NIC per config on the default Clos fabric ([`ClosConfig::default`]:
    /// up to 8 NICs).
    ///
    /// # Errors
    /// As [`SimHost::on_clos`].
    pub fn new(cfgs: &[SimNicConfig]) -> Result<SimHost, SimError> {
        SimHost::on_clos(cfgs, ClosConfig::default())
    }

    /// The device sides of `cfgs` (BAR0, admin and event queues, tables) in front of the NIC
    /// models of `clos`.
    fn devices(cfgs: &[SimNicConfig], clos: clos::Clos) -> Result<SimHost, SimError> {
        let world = Arc::new(Mutex::new(World {
            nics: Vec::new(),
            now_ns: 0,
            fw: Vec::new(),
            clos: Box::new(clos),
        }));
        let mut nics = Vec::new();
        for (index, cfg) in cfgs.iter().enumerate() {
            let len = default_bar_len(&cfg.params);
            let twin = Twin::new(TwinConfig {
                bdf: cfg.bdf,
                bar0_len: len as u64,
                vectors: cfg.vectors,
                vendor_id: (cfg.params.device_id >> 16) as u16,
                device_id: cfg.params.device_id as u16,
                iova_base: mrc_driver::sys::Iova(0x1_0000_0000 * (index as u64 + 1)),
                ..TwinConfig::default()
            })?;
            let mut bar = vec![0u8; len];
            write_default_map(&mut bar, &cfg.params).ok_or(SimError::BadParams { bdf: cfg.bdf })?;
            let dev = twin.device().clone();
            for (i, w) in bar.chunks_exact(4).enumerate() {
                dev.reg_write32(i as u64 * 4, u32::from_le_bytes([w[0], w[1], w[2], w[3]]))?;
            }
            lock(&world).nics.push(NicState::new(
                dev,
                cfg.vectors,
                cfg.params,
                default_gid(cfg.bdf),
            ));
            lock(&world).fw_power_on(index);
            let removed = Arc::new(AtomicBool::new(false));
            let w = world.clone();
            let gone = removed.clone();
            twin.on_mmio_write(move |_, write: MmioWrite| {
                if !gone.load(Ordering::Relaxed) {
                    let mut world = lock(&w);
                    world.on_write(index, write);
                    world.fw_on_write(index, write.offset, write.value);
                }
            });
            let gone = removed.clone();
            let liveness = AtomicU32::new(0);
            twin.on_mmio_read(move |_, offset, _| {
                if gone.load(Ordering::Relaxed) {
                    Some(u64::MAX)
                } else if offset == u64::from(defaults::DEVICE) + 0x38 {
                    Some(u64::from(liveness.fetch_add(1, Ordering::Relaxed)))
                } else {
                    None
                }
            });
            nics.push(SimNic {
                twin: Arc::new(twin),
                index,
                world: world.clone(),
                removed,
            });
        }
        Ok(SimHost { nics, world })
    }

    /// A host whose NICs are the simulator's NIC model (datapath stage and the NIC image's
    /// main loop, PCIe, firmware cores) on a multi-plane Clos fabric, in virtual time (see the
    /// `clos` module docs for the contract).
    ///
    /// # Errors
    /// Bad parameters, the twin failed, or the fabric or a NIC model could not be built.
    pub fn on_clos(cfgs: &[SimNicConfig], clos: ClosConfig) -> Result<SimHost, SimError> {
        let qps = cfgs
            .iter()
            .map(|c| c.params.max_qps.min(c.params.doorbell_pages) as usize)
            .max()
            .unwrap_or(0);
        let c = clos::Clos::new(clos, cfgs.len(), qps).map_err(SimError::Clos)?;
        SimHost::devices(cfgs, c)
    }

    /// The `elf` firmware level for the NICs' update path: each NIC's `FW_*` admin commands run
    /// in the `mrc-nic` ELF at `image` (`None`: the image built from this source tree) on an
    /// emulated core booted through its boot ROM from a flash whose slot A holds that image
    /// (module `firmware_elf`); the other admin commands and the datapath stay with the
    /// simulated device. Needs the `elf` cargo feature.
    ///
    /// # Errors
    /// The image could not be built, read or booted.
    #[cfg(feature = "elf")]
    pub fn with_elf_firmware(self, image: Option<&std::path::Path>) -> Result<SimHost, SimError> {
        let elf = crate::nic::image::elf_image::load(image).map_err(SimError::Firmware)?;
        {
            let mut w = lock(&self.world);
            for i in 0..w.nics.len() {
                let dev = w.nics[i].dev.clone();
                let e = firmware_elf::ElfFw::power_on(&elf, dev).map_err(SimError::Firmware)?;
                let World { nics, fw, .. } = &mut *w;
                if let (Some(f), Some(n)) = (fw.get_mut(i), nics.get(i)) {
                    f.elf = Some(e);
                    f.publish(n);
                }
            }
        }
        Ok(self)
    }

    /// Two default NICs (`0000:00:04.0` and `0000:00:05.0`) on different leaves of the default
    /// Clos fabric ([`ClosConfig::default`]).
    ///
    /// # Errors
    /// As [`SimHost::on_clos`].
    pub fn clos_pair() -> Result<SimHost, SimError> {
        SimHost::on_clos(
            &[SimNicConfig::numbered(4), SimNicConfig::numbered(5)],
            ClosConfig::default(),
        )
    }

    /// The fabric's and the device sides' totals.
    pub fn clos_counters(&self) -> ClosCounters {
        lock(&self.world).clos.counters()
    }

    /// Plane `plane` is lost from `down_ns` to `up_ns` (virtual time; a
    /// [`WindowKind::Plane`] window).
    pub fn schedule_plane_outage(&self, plane: u8, down_ns: u64, up_ns: u64) {
        self.schedule_window(WindowKind::Plane(plane), down_ns, up_ns);
    }

    /// A fault window `[from_ns, to_ns)` in virtual time (see the `faults` module
    /// docs for what each kind does).
    pub fn schedule_window(&self, kind: WindowKind, from_ns: u64, to_ns: u64) {
        lock(&self.world).schedule_window(kind, from_ns, to_ns);
    }

    /// Every fault stops now (open windows end, pending ones never start, DMA is
    /// fast, every link clean); the liveness phase of a test follows.
    pub fn stop_faults(&self) {
        lock(&self.world).stop_faults();
    }

    /// Slow DMA on NIC `nic` (host memory answers its reads `ns` later).
    pub fn set_dma_delay(&self, nic: usize, ns: u64) {
        lock(&self.world).clos.set_host_delay(nic, ns);
    }

    /// A raw frame arrives at NIC `nic` from outside (hostile input); the fabric
    /// then runs until quiet. Returns what became of it.
    pub fn inject_frame(&self, nic: usize, frame: &[u8]) -> RxOutcome {
        lock(&self.world).inject(nic, frame)
    }

    /// The counters of NIC `nic`'s firmware engines (all shards).
    pub fn engine_counters(&self, nic: usize) -> Option<EngineCounters> {
        let w = lock(&self.world);
        let c = &w.clos;
        (nic < w.nics.len()).then(|| c.nic_ref(nic).engine_counters())
    }

    /// The counters of NIC `nic`'s datapath stages (received packets and their
    /// drops, packets sent, retransmissions, ...).
    pub fn datapath_counters(&self, nic: usize) -> Option<DatapathCounters> {
        let w = lock(&self.world);
        let c = &w.clos;
        (nic < w.nics.len()).then(|| c.nic_ref(nic).datapath_counters())
    }

    /// The counters of NIC `nic`'s model (packets on its ports, PCIe, firmware).
    pub fn model_counters(&self, nic: usize) -> Option<crate::nic::NicCounters> {
        let w = lock(&self.world);
        let c = &w.clos;
        (nic < w.nics.len()).then(|| c.nic_ref(nic).counters())
    }

    /// Runs until the NICs are idle and the fabric empty, or the step budget ran
    /// out (doorbells do this on their own; call it to let timers and edges play out).
    pub fn run(&self) {
        lock(&self.world).clos_pump();
    }

    /// With [`ClosConfig::doorbells_run`] off: runs until a completion reached some
    /// NIC's host memory as a CQE (true), or virtual time reached `end_ns` (false). Placed
    /// payloads and EV events are written as they arrive; a NIC that got a completion takes
    /// the ring entries that then fit.
    pub fn run_until_completion(&self, end_ns: u64) -> bool {
        lock(&self.world).clos_until_completion(end_ns)
    }

    /// The simulator the NICs run in (to schedule fabric faults, and for a run's
    /// report: [`crate::run::RunReport::collect`]).
    pub(crate) fn with_sim<R>(
        &self,
        f: impl FnOnce(&mut crate::core::sim::Simulator<crate::run::World>) -> R,
    ) -> R {
        f(&mut lock(&self.world).clos.sim)
    }

    /// Advances virtual time to at least `t_ns`, applying window edges on the way.
    pub fn advance_to(&self, t_ns: u64) {
        lock(&self.world).clos_advance(t_ns);
    }

    /// The NICs are idle (no send outstanding, nothing on its way to the host) and the
    /// fabric is empty (engine timers, such as probes, may still be armed).
    pub fn idle(&self) -> bool {
        lock(&self.world).clos.quiet()
    }

    /// Virtual time, ns.
    pub fn now_ns(&self) -> u64 {
        lock(&self.world).now_ns
    }

    /// Holds (`true`) or releases the send doorbells of every NIC at once (see
    /// [`SimNic::hold_doorbells`]): released together, what they were given meanwhile starts
    /// at the same virtual time.
    pub fn hold_doorbells(&self, hold: bool) {
        lock(&self.world).hold_all_doorbells(hold);
    }

    /// The NICs.
    pub fn nics(&self) -> &[SimNic] {
        &self.nics
    }
    /// NIC `i`.
    pub fn nic(&self, i: usize) -> Option<&SimNic> {
        self.nics.get(i)
    }
}

impl SimNic {
    /// The backend a driver opens.
    pub fn backend(&self) -> SharedBackend {
        self.twin.clone()
    }
    /// The twin behind [`SimNic::backend`]: the device side a server (`crate::serve`) drives
    /// for a driver in another process.
    pub fn twin(&self) -> &Arc<Twin> {
        &self.twin
    }
    /// The PCI address.
    pub fn bdf(&self) -> Bdf {
        self.twin.bdf()
    }
    /// The NIC's address.
    pub fn gid(&self) -> [u8; 16] {
        default_gid(self.bdf())
    }
    /// Pulls the device: every later MMIO read returns all ones and writes are dropped.
    pub fn surprise_remove(&self) {
        self.removed.store(true, Ordering::Relaxed);
    }
    /// Holds send doorbells (`true`): the NIC records each new producer index but executes
    /// nothing until released (`false`), which runs everything posted meanwhile. Lets a
    /// benchmark time the driver's posting and polling without the device model in between.
    pub fn hold_doorbells(&self, hold: bool) {
        lock(&self.world).hold_doorbells(self.index, hold);
    }
    /// Device-side counters.
    pub fn counters(&self) -> NicCounters {
        lock(&self.world).nics[self.index].counters
    }
    /// Sets a port's link (operational) state, as a cable pull would; posts PORT events.
    pub fn set_link(&self, port: u8, up: bool) {
        lock(&self.world).set_link(self.index, port, up);
    }
}

/// Size of an admin command (for the admin module).
pub(crate) const ADMIN_CMD_BYTES: u64 = core::mem::size_of::<AdminCmd>() as u64;

#[cfg(test)]
mod tests;
