//! Admin command execution of a simulated NIC: the admin ring (fetch by DMA, reply, interrupt)
//! around the device's executor, `mrc_firmware::admin` (the same code the NIC image runs), with
//! the simulator's device services ([`SimEnv`]: IOMMU probes through the twin's DMA, the event
//! queue, port registers, firmware update, the answer to an admin EV probe).
//!
//! The executor drives the NIC model's engines ([`crate::nic::DriverEngine`]).

use mrc_abi::device::admin::{AdminCmd, AdminCommand, AdminReply, AdminStatus, CMD_IRQ};
use mrc_abi::device::event::Event;
use mrc_abi::device::regs::DeviceParams;
use mrc_driver::sys::twin::TwinDevice;
use mrc_driver::sys::Iova;
use mrc_driver::zerocopy::{FromBytes, IntoBytes};
use mrc_firmware::admin::{AdminEnv, AdminResult, Ctx, Done};

use super::state::*;
use super::{World, ADMIN_CMD_BYTES};

/// The simulated NIC's device services for the executor.
struct SimEnv<'a> {
    dev: &'a TwinDevice,
    counters: &'a mut NicCounters,
    params: &'a DeviceParams,
    vectors: u32,
    port_admin: &'a mut [bool],
    port_link: &'a [bool],
    fw_version: u32,
    now_ns: u64,
}

impl AdminEnv for SimEnv<'_> {
    fn vectors(&self) -> u32 {
        self.vectors
    }
    fn dma_mapped(&mut self, iova: u64, len: u64) -> bool {
        // Probe the first and the last byte.
        let mut byte = [0u8; 1];
        let last = iova.saturating_add(len.saturating_sub(1));
        self.dev.dma_read(Iova(iova), &mut byte).is_ok()
            && self.dev.dma_read(Iova(last), &mut byte).is_ok()
    }
    fn post_event(&mut self, event: Event) {
        post_event(self.dev, self.counters, event, self.now_ns);
    }
    fn fw_version(&self) -> u32 {
        self.fw_version
    }
    fn num_ports(&self) -> usize {
        self.port_admin.len()
    }
    fn port_admin(&self, p: usize) -> bool {
        self.port_admin.get(p).copied().unwrap_or(false)
    }
    fn port_link(&self, p: usize) -> bool {
        self.port_link.get(p).copied().unwrap_or(false)
    }
    fn set_port_admin(&mut self, p: usize, up: bool) {
        if let Some(a) = self.port_admin.get_mut(p) {
            *a = up;
        }
        publish_port(self.dev, self.params, self.port_admin, self.port_link, p);
    }
    fn port_plane(&self, p: usize) -> u8 {
        (p as u32 % self.params.num_planes.max(1)) as u8
    }
    fn port_speed_mbps(&self) -> u32 {
        PORT_SPEED_MBPS
    }
    fn firmware(&mut self, _cmd: &AdminCommand) -> AdminResult {
        // `run_admin` hands FW_* commands to `World::fw_execute` before the executor.
        Err((AdminStatus::Internal, 0))
    }
}

impl World {
    /// The admin doorbell: run every command from the consumer index to `producer`.
    pub(crate) fn run_admin(&mut self, i: usize, producer: u32) {
        let nic = &self.nics[i];
        nic.reg_w(ADMIN + Q_PRODUCER, producer);
        if nic.reg(ADMIN + Q_STATUS) & 1 == 0 {
            return;
        }
        let log2 = nic.reg(ADMIN + Q_LOG2) as u8;
        let base = nic.reg64(ADMIN + Q_BASE_LO, ADMIN + Q_BASE_HI);
        let resp = nic.reg64(ADMIN + Q_RESP_LO, ADMIN + Q_RESP_HI);
        let mut cons = nic.reg(ADMIN + Q_CONSUMER);
        // A producer more than a ring ahead is a host bug: run at most one ring's worth.
        let mut budget = 1u32 << log2;
        while cons != producer && budget > 0 {
            budget -= 1;
            let slot = u64::from(cons & ((1 << log2) - 1));
            let mut raw = [0u8; ADMIN_CMD_BYTES as usize];
            let reply = if self.nics[i]
                .dev
                .dma_read(Iova(base + slot * ADMIN_CMD_BYTES), &mut raw)
                .is_err()
            {
                AdminReply {
                    command_id: 0,
                    status: AdminStatus::Internal,
                    syndrome: 0,
                    result: [0; 3],
                }
            } else {
                let cmd = AdminCmd::read_from_bytes(&raw).ok();
                match cmd.map(|c| (c.command_id.get(), c.decode())) {
                    Some((id, Ok(c))) => {
                        // A command takes `ClosConfig::admin_ns` of virtual time, while the
                        // NICs and the fabric run (one clock).
                        let ns = self.clos.admin_ns();
                        if ns > 0 {
                            self.clos_advance(self.now_ns + ns);
                        }
                        let reply = self.execute(i, id, c);
                        if raw[1] & CMD_IRQ != 0 {
                            let v = self.nics[i].reg(ADMIN + Q_IRQ);
                            self.nics[i].raise(v);
                        }
                        reply
                    }
                    Some((id, Err(e))) => AdminReply::rejected(id, e),
                    None => AdminReply {
                        command_id: 0,
                        status: AdminStatus::Internal,
                        syndrome: 0,
                        result: [0; 3],
                    },
                }
            };
            let nic = &mut self.nics[i];
            nic.counters.admin_commands += 1;
            if reply.status != AdminStatus::Ok {
                nic.counters.admin_errors += 1;
            }
            let r = reply.encode(mrc_abi::device::cqe::expected_owner(cons, log2));
            let _ = nic.dev.dma_write(Iova(resp + slot * 32), r.as_bytes());
            cons = cons.wrapping_add(1);
            nic.reg_w(ADMIN + Q_CONSUMER, cons);
        }
        // Fabric work a doorbell left unfinished (its step budget of virtual time ran out,
        // e.g. retransmissions into a peer QP not yet ready) resumes here: a command such as
        // the peer's RTR may be what it waits for, and programs that only spin on memory
        // would otherwise never move virtual time again.
        if !self.nics[i].hold_doorbells {
            self.clos_doorbell(i, None);
        }
    }

    /// One command: firmware update commands go to [`World::fw_execute`], every other one to
    /// the executor; a QP that entered ERROR has its pending work flushed.
    fn execute(&mut self, i: usize, id: u16, cmd: AdminCommand) -> AdminReply {
        use AdminCommand as C;
        let now = self.now_ns;
        if let C::FwStatus
        | C::FwBegin(_)
        | C::FwChunk(_)
        | C::FwCommit(_)
        | C::FwConfirm
        | C::FwRollback = cmd
        {
            return Done::from(self.fw_execute(i, cmd)).reply(id);
        }
        let fw_version = self.fw_version(i);
        let NicState {
            dev,
            vectors,
            params,
            counters,
            t,
            port_admin,
            port_link,
            ..
        } = &mut self.nics[i];
        let mut env = SimEnv {
            dev,
            counters,
            params,
            vectors: *vectors,
            port_admin,
            port_link,
            fw_version,
            now_ns: now,
        };
        // The NIC model's engines are behind the device tables (a host's devices are on their
        // fabric before any driver can ring the admin doorbell).
        let c = &mut *self.clos;
        let mut engine = c.engine(i);
        let mut cx = Ctx {
            params,
            env: &mut env,
            engine: &mut engine,
            now_ns: now,
        };
        let done = t.execute(cmd, &mut cx);
        self.clos_bind(i);
        self.clos.settle(i);
        if let Some(qpn) = done.entered_error {
            self.flush(i, qpn, now);
        }
        done.reply(id)
    }
}
