//! The firmware: engine instructions per packet on the host (callgrind), the NIC image's
//! sections and self-test counts, and the firmware's own guest instructions per packet and per
//! event under QEMU.

use super::{int_after, int_before, num, section_sizes, Outputs, Step};
use crate::report::{budget, capacity, number, same_run, Row};

/// Instructions per delivered packet the engine (with the datapath models and the test kit's
/// channel) is held to on x86-64.
const ENGINE_BUDGET: f64 = 300.0;

/// Cycles a ~1 GHz NIC core has per packet at one 200G plane's ~6 M packets/s: the upper end
/// of the 40-160 cycles per packet that make per-packet work the datapath's, not firmware's.
const CORE_CYCLES_PER_PACKET: f64 = 160.0;

/// `just engine-cost`: callgrind over the test kit's one-way stream.
pub const ENGINE_COST: Step = Step {
    name: "engine-cost",
    title: "Firmware engine: instructions per packet (x86-64, callgrind)",
    commands: &["just engine-cost"],
    collect: engine_rows,
};

/// `just fw-size`: the NIC image's sections and the QEMU self-test's counts.
pub const IMAGE: Step = Step {
    name: "fw-image",
    title: "NIC image: sections and guest instructions (rv32imac, QEMU)",
    commands: &["just fw-size"],
    collect: image_rows,
};

/// `just fw-cost`: the main loop and engine alone, per delivered packet and per event.
pub const FW_COST: Step = Step {
    name: "fw-cost",
    title: "NIC firmware: guest instructions per packet and per event (rv32imac, QEMU)",
    commands: &["just fw-cost"],
    collect: fw_cost_rows,
};

/// The DP->FW event kinds `just fw-cost` reports, with the names the rows use.
const EVENT_KINDS: [(&str, &str); 8] = [
    ("ack_summary", "ACK summary"),
    ("loss", "loss"),
    ("nack", "NACK"),
    ("probe_reply", "probe reply"),
    ("tx_start", "send started"),
    ("ev_deliveries", "EV deliveries"),
    ("skip_served", "skip served"),
    ("wimm_placed", "Write-with-Immediate placed"),
];

fn fw_cost_rows(o: &Outputs) -> Result<Vec<Row>, String> {
    let run = o.json("target/fw-cost.json")?;
    if run["failed"] != false {
        return Err("the fw-cost stream failed".into());
    }
    let per_packet = num(
        &run["guest_instructions_per_delivered_packet"],
        "guest_instructions_per_delivered_packet",
    )?;
    let workload = run["workload"].as_str().unwrap_or("one-way stream");
    let mut rows = vec![Row::new(
        "firmware guest instructions per delivered packet (main loop + engine)",
        per_packet,
        "instr",
        budget(
            "the firmware's per-packet budget",
            num(&run["budget_per_packet"], "budget_per_packet")?,
        ),
    )
    .note(format!(
        "{workload}; both NICs; the datapath models, channel and driver of the same run: {} per packet",
        number(
            num(
                &run["datapath_models_channel_and_driver_per_packet"],
                "datapath_models_channel_and_driver_per_packet"
            )?,
            0
        )
    ))
    .headline()];
    for (key, name) in EVENT_KINDS {
        let e = &run["events"][key];
        let count = num(&e["count"], key)?;
        if count == 0.0 {
            continue;
        }
        rows.push(
            Row::new(
                format!("firmware guest instructions per {name} event"),
                num(&e["instructions_per_event"], key)?,
                "instr",
                same_run(
                    "the firmware's instructions per delivered packet",
                    per_packet,
                ),
            )
            .note(format!("{} events in the run", number(count, 0))),
        );
    }
    let timer = &run["timer"];
    rows.push(
        Row::new(
            "firmware guest instructions per timer fired",
            num(&timer["instructions_per_timer"], "instructions_per_timer")?,
            "instr",
            same_run(
                "the firmware's instructions per delivered packet",
                per_packet,
            ),
        )
        .note(format!(
            "{} timers fired; an idle timer check costs {}",
            number(num(&timer["fired"], "fired")?, 0),
            number(
                num(
                    &timer["instructions_per_idle_call"],
                    "instructions_per_idle_call"
                )?,
                0
            )
        )),
    );
    let cmds = &run["commands"];
    rows.push(
        Row::new(
            "firmware guest instructions per FW->DP command",
            num(
                &cmds["instructions_per_command"],
                "instructions_per_command",
            )?,
            "instr",
            same_run(
                "the firmware's instructions per delivered packet",
                per_packet,
            ),
        )
        .note(format!(
            "{} commands, {} DP->FW events in the run",
            number(num(&cmds["count"], "count")?, 0),
            number(num(&run["dp_to_fw_entries"], "dp_to_fw_entries")?, 0)
        )),
    );
    Ok(rows)
}

fn engine_rows(o: &Outputs) -> Result<Vec<Row>, String> {
    let run = o.json("target/engine_cost.json")?;
    let packets = num(&run["delivered_packets"], "delivered_packets")?;
    if run["failed"] != false || packets == 0.0 {
        return Err("the engine_cost run failed or delivered nothing".into());
    }
    let total = callgrind_total(o, "target/engine_cost.callgrind")?;
    // The split: the same packets in half the messages (32 packets each).
    let run32 = o.json("target/engine_cost_32.json")?;
    let total32 = callgrind_total(o, "target/engine_cost_32.callgrind")?;
    let msgs = num(&run["messages"], "messages")?;
    let msgs32 = num(&run32["messages"], "messages")?;
    if run32["failed"] != false
        || num(&run32["delivered_packets"], "delivered_packets")? != packets
        || msgs32 >= msgs
    {
        return Err("the 32-packet engine_cost run failed or is not the same stream".into());
    }
    let per_msg = (total - total32) / (msgs - msgs32);
    let msg_part = per_msg * msgs / packets;
    Ok(vec![
        Row::new(
            "engine instructions per delivered packet",
            total / packets,
            "instr",
            budget("the engine's per-packet budget", ENGINE_BUDGET),
        )
        .note(format!(
            "{} packets over 256 EVs, 1 % loss: datapath models, two engines and the test kit's channel; {} retransmits",
            number(packets, 0),
            number(num(&run["retransmits"], "retransmits")?, 0)
        ))
        .headline(),
        Row::new(
            "of which the messages' work (16 packets each)",
            msg_part,
            "instr",
            same_run("engine instructions per delivered packet", total / packets),
        )
        .note(format!(
            "{} instructions per message (post, first packet, completion order and CQE): the difference to a run with 32 packets per message; {} per packet without it",
            number(per_msg, 0),
            number(total / packets - msg_part, 1)
        )),
    ])
}

/// The instructions a callgrind output file under the root counted (its `totals:` line).
fn callgrind_total(o: &Outputs, rel: &str) -> Result<f64, String> {
    let p = o.root.join(rel);
    std::fs::read_to_string(&p)
        .map_err(|e| format!("cannot read {}: {e}", p.display()))?
        .lines()
        .find_map(|l| l.strip_prefix("totals: "))
        .and_then(|n| n.trim().parse::<f64>().ok())
        .ok_or_else(|| format!("no totals line in {rel}"))
}

/// `length` of the region called `name` in `firmware/memory-map.toml`.
fn region_bytes(map: &str, name: &str) -> Option<u64> {
    let at = map.find(&format!("name = \"{name}\""))?;
    let rest = &map[at..];
    let end = rest[1..].find("[[").map_or(rest.len(), |e| e + 1);
    rest[..end].lines().find_map(|l| {
        let v = l.trim().strip_prefix("length")?.trim().strip_prefix('=')?;
        let v = v.split('#').next()?.trim().replace('_', "");
        match v.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        }
    })
}

fn image_rows(o: &Outputs) -> Result<Vec<Row>, String> {
    let log = &o.log;
    let sizes = section_sizes(log);
    let size = |s: &str| {
        sizes
            .get(s)
            .map(|v| *v as f64)
            .ok_or_else(|| format!("no {s} size in the output"))
    };
    let text_budget =
        int_before(log, ".text", "bytes budget").ok_or("no `.text N of M bytes budget` line")?;
    let map = std::fs::read_to_string(o.root.join("firmware/memory-map.toml"))
        .map_err(|e| format!("cannot read firmware/memory-map.toml: {e}"))?;
    let dtcm = region_bytes(&map, "DTCM").ok_or("no DTCM length in firmware/memory-map.toml")?;
    let counted = |line_has: &str, marker: &str| {
        int_before(log, line_has, marker)
            .map(|v| v as f64)
            .ok_or_else(|| format!("no `{line_has} ... {marker}` line in the self-test output"))
    };
    let stream = counted("stream:", "instr per delivered data packet")?;
    let checked = counted("two NICs:", "instr per delivered data packet")?;
    let idle = counted("building blocks:", "instr/iteration")?;
    let admin = counted("admin:", "instr per command")?;
    let stack = int_after(log, "admin path stack:").ok_or("no `admin path stack` line")? as f64;
    let stack_budget = int_after(log, "(budget").ok_or("no stack budget in the output")? as f64;
    Ok(vec![
        Row::new(
            "NIC image .text",
            size(".text")?,
            "bytes",
            budget("ITCM code budget", text_budget as f64),
        )
        .note(format!(
            ".rodata {} bytes, .data {} bytes",
            number(size(".rodata")?, 0),
            number(size(".data")?, 0)
        ))
        .headline(),
        Row::new(
            "NIC image .bss (engine, admin tables, rings)",
            size(".bss")?,
            "bytes",
            capacity("DTCM, firmware/memory-map.toml", dtcm as f64),
        )
        .note("the stack takes the rest of the DTCM"),
        Row::new(
            "admin path stack depth",
            stack,
            "bytes",
            budget("mrc_nicloop::STACK_BUDGET", stack_budget),
        ),
        Row::new(
            "firmware guest instructions per delivered data packet",
            stream,
            "instr",
            budget(
                "a 1 GHz core's cycles per packet at one 200G plane's 6 M packets/s",
                CORE_CYCLES_PER_PACKET,
            ),
        )
        .note(
            "the main loop and engine of both NICs in the self-test's one-way stream: 50,000 \
             packets, 1 % loss, 256 EVs (the datapath models not counted; per event: fw-cost below)",
        ),
        Row::new(
            "guest instructions per delivered packet, checked two-NIC run",
            checked,
            "instr",
            same_run("the one-way stream's firmware figure", stream),
        )
        .note("the datapath models, checker, byte copies and wire codec included"),
        Row::new(
            "guest instructions per admin command",
            admin,
            "instr",
            same_run("one iteration of the idle building blocks", idle),
        )
        .note("PD, CQ, QP, INIT, a refused RTR, RTR, RTS, DESTROY_QP, DESTROY_CQ; one main-loop step each"),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
.text     95508   0
.rodata    2528   95508
.data         0   268435456
.bss      89600   268435456
.text 95508 of 131072 bytes budget
INFO two NICs: 548770308 guest instr, 76772 instr per delivered data packet (datapath models, checker, byte copies and wire codec included)
INFO stream: 50000 data packets delivered, 558 lost, 533 retransmits; firmware (main loop + engine, both NICs) 120 instr per delivered data packet, whole run 848
INFO building blocks: 1000 iterations over 124300 ns, 124 instr/iteration, probes 48, timers 3
INFO admin: 9 commands through the main loop, 9405 instr per command (main-loop step included)
INFO boot and admin path stack: 21144 bytes deep (budget 32768)
";

    #[test]
    fn engine_cost_splits_into_messages_and_packets() {
        let root = std::env::temp_dir().join(format!("mrc-bench-ecost-{}", std::process::id()));
        std::fs::create_dir_all(root.join("target")).unwrap();
        let w = |f: &str, s: &str| std::fs::write(root.join("target").join(f), s).unwrap();
        w(
            "engine_cost.json",
            r#"{"delivered_packets":1000000,"failed":false,"messages":62500,"retransmits":10827}"#,
        );
        w(
            "engine_cost.callgrind",
            "events: Ir\nsummary: 342560014\ntotals: 342560014\n",
        );
        w(
            "engine_cost_32.json",
            r#"{"delivered_packets":1000000,"failed":false,"messages":31250}"#,
        );
        w(
            "engine_cost_32.callgrind",
            "events: Ir\nsummary: 320835357\ntotals: 320835357\n",
        );
        let o = Outputs::for_test(&root, "", 1024.0);
        let rows = engine_rows(&o).unwrap();
        assert!((rows[0].value - 342.560014).abs() < 1e-9);
        // (342,560,014 - 320,835,357) / 31,250 = 695.19 per message, 43.45 per packet
        assert!(
            (rows[1].value - 43.449314).abs() < 1e-6,
            "{}",
            rows[1].value
        );
        assert!(
            rows[1].note.contains("695 instructions per message"),
            "{}",
            rows[1].note
        );
        assert!(
            rows[1].note.contains("299.1 per packet without it"),
            "{}",
            rows[1].note
        );
        // A second run of other packets is refused.
        w(
            "engine_cost_32.json",
            r#"{"delivered_packets":999999,"failed":false,"messages":31250}"#,
        );
        assert!(engine_rows(&o).is_err());
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn image_figures_are_read() {
        let root = std::env::temp_dir().join(format!("mrc-bench-fw-{}", std::process::id()));
        std::fs::create_dir_all(root.join("firmware")).unwrap();
        std::fs::write(
            root.join("firmware/memory-map.toml"),
            "[[r]]\nname = \"ITCM\"\nlength = 0x0002_0000\n[[r]]\nname = \"DTCM\"\nlength = 0x0001_F000\n",
        )
        .unwrap();
        let o = Outputs::for_test(&root, LOG, 1024.0);
        let rows = image_rows(&o).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        let by = |f: &str| rows.iter().find(|r| r.figure == f).unwrap();
        assert_eq!(by("NIC image .text").value, 95_508.0);
        assert_eq!(by("NIC image .text").baseline.value, 131_072.0);
        assert_eq!(
            by("NIC image .bss (engine, admin tables, rings)")
                .baseline
                .value,
            126_976.0
        );
        assert_eq!(by("admin path stack depth").baseline.value, 32_768.0);
        let g = by("firmware guest instructions per delivered data packet");
        assert_eq!((g.value, g.baseline.value), (120.0, 160.0));
        assert_eq!(g.ratio, Some(120.0 / 160.0));
        let c = by("guest instructions per delivered packet, checked two-NIC run");
        assert_eq!((c.value, c.baseline.value), (76_772.0, 120.0));
        let a = by("guest instructions per admin command");
        assert_eq!((a.value, a.baseline.value), (9_405.0, 124.0));
    }

    #[test]
    fn fw_cost_figures_are_read() {
        let root = std::env::temp_dir().join(format!("mrc-bench-fwcost-{}", std::process::id()));
        std::fs::create_dir_all(root.join("target")).unwrap();
        let ev = |c: u32, i: u32| format!(r#"{{"count":{c},"instructions_per_event":{i}}}"#);
        let json = format!(
            r#"{{"workload":"w","delivered_packets":50000,"failed":false,
            "guest_instructions_per_delivered_packet":120,"budget_per_packet":120,
            "datapath_models_channel_and_driver_per_packet":728,"dp_to_fw_entries":8047,
            "events":{{"ack_summary":{},"loss":{},"nack":{},"probe_reply":{},"tx_start":{},
            "ev_deliveries":{},"skip_served":{},"wimm_placed":{}}},
            "timer":{{"fired":410,"instructions_per_timer":1432,"idle_calls":9832,
            "instructions_per_idle_call":30}},
            "commands":{{"count":6370,"instructions_per_command":194}}}}"#,
            ev(3921, 653),
            ev(499, 982),
            ev(0, 0),
            ev(499, 460),
            ev(3, 426),
            ev(0, 0),
            ev(0, 0),
            ev(0, 0)
        );
        std::fs::write(root.join("target/fw-cost.json"), json).unwrap();
        let o = Outputs::for_test(&root, "", 0.0);
        let rows = fw_cost_rows(&o).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        let by = |f: &str| rows.iter().find(|r| r.figure == f).unwrap();
        let p = by("firmware guest instructions per delivered packet (main loop + engine)");
        assert_eq!((p.value, p.baseline.value), (120.0, 120.0));
        assert!(p.headline);
        assert_eq!(
            by("firmware guest instructions per ACK summary event").value,
            653.0
        );
        assert_eq!(
            by("firmware guest instructions per send started event").value,
            426.0
        );
        assert_eq!(
            by("firmware guest instructions per timer fired").value,
            1432.0
        );
        assert_eq!(
            by("firmware guest instructions per FW->DP command").value,
            194.0
        );
        // Kinds that did not occur give no row.
        assert!(rows.iter().all(|r| !r.figure.contains("NACK")));
        assert_eq!(rows.len(), 7);
    }

    #[test]
    fn missing_lines_fail_with_a_reason() {
        let o = Outputs::for_test(&std::env::temp_dir(), ".text 1 0\n", 0.0);
        let e = image_rows(&o).unwrap_err();
        assert!(e.contains("bytes budget"), "{e}");
    }

    #[test]
    fn regions_are_read_from_the_memory_map() {
        let map = "[[x]]\nname = \"A\"\nlength = 4096\n\n[[x]]\nname = \"B\"\norigin = 0\nlength = 0x1_000 # four KiB\n";
        assert_eq!(region_bytes(map, "A"), Some(4096));
        assert_eq!(region_bytes(map, "B"), Some(4096));
        assert_eq!(region_bytes(map, "C"), None);
    }
}
