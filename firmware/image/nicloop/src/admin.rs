//! Admin commands: the shared executor (`mrc_firmware::admin`) on the NIC's tables, the
//! engine and the device services of the loop.

use mrc_abi::device::admin::{AdminCommand, AdminReply, AdminStatus};
use mrc_abi::device::csr::{CsrEvent, RegionWrite, REGION_REMOTE_READ, REGION_REMOTE_WRITE};
use mrc_abi::device::event::Event;
use mrc_firmware::admin::{AdminEnv, AdminResult, Core, Ctx, RegionTable};
use mrc_firmware::capacity::Capacity;
use mrc_firmware::csr_queue::CsrQueue;
use mrc_firmware::datapath::placement::MemRegion;

use crate::commands::post_event;
use crate::{
    Datapath, Fw, LoopCounters, NicAdmin, Ports, ADMIN_BUDGET, ADMIN_ROOM, FW_VERSION, LOOP_QUEUE,
    NIC_PARAMS, PLANES, PORTS, PORT_SPEED_MBPS, VECTORS,
};

/// The NIC's firmware-update service as the admin executor reaches it: the `FW_*` commands
/// and the running image's version. The NIC image implements it over its flash, boot record
/// and host DMA engine (`mrc_fw_update::service`); [`NoFirmware`] is a NIC without one.
pub trait Firmware {
    /// Execute a firmware update command (`FW_STATUS` .. `FW_ROLLBACK`).
    ///
    /// # Errors
    /// The refusal: status and syndrome.
    fn execute(&mut self, cmd: &AdminCommand) -> AdminResult;
    /// The running image's version (QUERY_DEVICE).
    fn running_version(&self) -> u32;
}

/// No update service: `FW_*` commands are refused `UNKNOWN_OPCODE` (syndrome: the opcode),
/// QUERY_DEVICE reports [`FW_VERSION`].
pub struct NoFirmware;

impl Firmware for NoFirmware {
    fn execute(&mut self, cmd: &AdminCommand) -> AdminResult {
        Err((AdminStatus::UnknownOpcode, cmd.opcode() as u32))
    }
    fn running_version(&self) -> u32 {
        FW_VERSION
    }
}

/// The NIC's device services for the executor.
pub(crate) struct LoopEnv<'a> {
    out: &'a mut CsrQueue<LOOP_QUEUE>,
    ports: &'a mut Ports,
    counters: &'a mut LoopCounters,
    fw: &'a mut dyn Firmware,
}

impl AdminEnv for LoopEnv<'_> {
    fn vectors(&self) -> u32 {
        VECTORS
    }
    fn dma_mapped(&mut self, _iova: u64, _len: u64) -> bool {
        // The core cannot reach the IOMMU: a bad IOVA faults when the datapath first uses it.
        true
    }
    fn post_event(&mut self, event: Event) {
        post_event(self.out, self.counters, event);
    }
    fn fw_version(&self) -> u32 {
        self.fw.running_version()
    }
    fn num_ports(&self) -> usize {
        PORTS
    }
    fn port_admin(&self, p: usize) -> bool {
        self.ports.admin.get(p).copied().unwrap_or(false)
    }
    fn port_link(&self, p: usize) -> bool {
        self.ports.link.get(p).copied().unwrap_or(false)
    }
    fn set_port_admin(&mut self, p: usize, up: bool) {
        if let Some(a) = self.ports.admin.get_mut(p) {
            *a = up;
        }
    }
    fn port_plane(&self, p: usize) -> u8 {
        (p % PLANES) as u8
    }
    fn port_speed_mbps(&self) -> u32 {
        PORT_SPEED_MBPS
    }
    fn firmware(&mut self, cmd: &AdminCommand) -> AdminResult {
        self.fw.execute(cmd)
    }
}

/// The datapath's region table as the loop writes it: through a FW->DP `RegionWrite` (at most
/// one per command).
pub(crate) struct RegionCommand {
    region: Option<RegionWrite>,
    mtu_payload: u32,
}

impl RegionCommand {
    /// No region write yet, `mtu_payload` for the default CC profile.
    pub(crate) fn new(mtu_payload: u32) -> Self {
        RegionCommand {
            region: None,
            mtu_payload,
        }
    }
}

impl RegionTable for RegionCommand {
    fn register_region(&mut self, r: MemRegion) -> bool {
        // The region must not pass the end of the address space (the datapath refuses it),
        // and a command writes one region.
        if r.base_va.checked_add(r.length).is_none() || self.region.is_some() {
            return false;
        }
        let mut access = 0;
        if r.access.remote_write {
            access |= REGION_REMOTE_WRITE;
        }
        if r.access.remote_read {
            access |= REGION_REMOTE_READ;
        }
        self.region = Some(RegionWrite::add(r.rkey, r.base_va, r.length, access));
        true
    }
    fn deregister_region(&mut self, rkey: u32) {
        self.region = Some(RegionWrite::remove(rkey));
    }
    fn mtu_payload(&self) -> u32 {
        self.mtu_payload
    }
}

impl<C: Capacity> Fw<C> {
    /// The admin part of a step: a held reply first (once the datapath took its region
    /// write), then up to [`ADMIN_BUDGET`] commands, each only once the engine's commands and
    /// room for the loop's own are out. Returns whether anything moved.
    pub(crate) fn admin_step<D: Datapath>(
        &mut self,
        now_ns: u64,
        dp: &mut D,
        admin: &mut NicAdmin,
        fw: &mut dyn Firmware,
    ) -> bool {
        let mut moved = false;
        if let Some(reply) = self.held {
            let Some(fence) = self.fence else {
                return false;
            };
            // The datapath has taken every entry up to the region write.
            if (dp.orders_taken().wrapping_sub(fence) as i32) < 0 {
                return false;
            }
            self.held = None;
            self.fence = None;
            self.reply(dp, &reply);
            moved = true;
        }
        for _ in 0..ADMIN_BUDGET {
            if self.engine.commands_pending() || self.out.room() < ADMIN_ROOM {
                break;
            }
            let Some(raw) = dp.pop_admin() else { break };
            moved = true;
            let (reply, region) = self.admin_command(now_ns, admin, &raw, fw);
            self.counters.admin_commands += 1;
            if reply.status != AdminStatus::Ok {
                self.counters.admin_errors += 1;
            }
            if let Some(r) = region {
                self.out.push(CsrEvent::RegionWrite(r));
                self.counters.region_writes += 1;
                self.held = Some(reply);
                return true;
            }
            self.reply(dp, &reply);
        }
        moved
    }

    fn reply<D: Datapath>(&mut self, dp: &mut D, reply: &AdminReply) {
        if !dp.push_admin_reply(reply) {
            self.counters.admin_replies_lost += 1;
        }
    }

    /// What the shared executor works on: the loop's device services (with `fw`, the update
    /// service) and the engine, with `regions` for its region table writes.
    pub(crate) fn parts<'a>(
        &'a mut self,
        regions: &'a mut RegionCommand,
        fw: &'a mut dyn Firmware,
    ) -> (LoopEnv<'a>, Core<'a, C, RegionCommand>) {
        let env = LoopEnv {
            out: &mut self.out,
            ports: &mut self.ports,
            counters: &mut self.counters,
            fw,
        };
        let qps = Core {
            engine: &mut self.engine,
            regions,
        };
        (env, qps)
    }

    /// Execute one command; its reply and the region write it made, if any. The QPN
    /// translation follows the tables afterwards.
    fn admin_command(
        &mut self,
        now_ns: u64,
        admin: &mut NicAdmin,
        raw: &[u8; 64],
        fw: &mut dyn Firmware,
    ) -> (AdminReply, Option<RegionWrite>) {
        let mut regions = RegionCommand::new(self.mtu_payload);
        let (mut env, mut qps) = self.parts(&mut regions, fw);
        let mut cx = Ctx {
            params: &NIC_PARAMS,
            env: &mut env,
            engine: &mut qps,
            now_ns,
        };
        // A QP entering ERROR: the engine flushes its work requests with completions itself.
        let (reply, _) = admin.handle(raw, &mut cx);
        let region = regions.region;
        self.map.update(admin);
        (reply, region)
    }
}
