//! The host driver's data path (criterion) and the RTL's synthesis counts (Yosys).

use super::{Outputs, Step};
use crate::report::{capacity, figure, number, same_run, Row};

/// `cargo bench -p mrc-driver`: post_send and poll_cq against raw ring work.
pub const DRIVER: Step = Step {
    name: "driver",
    title: "Host driver: work requests and completions per second (one core)",
    commands: &["cargo bench -q -p mrc-driver --bench datapath -- 'post_send|poll_cq'"],
    collect: driver_rows,
};

/// Yosys `synth_xilinx` of each RTL block.
pub const RTL: Step = Step {
    name: "rtl",
    title: "RTL: synthesis (Yosys synth_xilinx, 7-series)",
    commands: &["fpga-rtl/scripts/synth.sh"],
    collect: rtl_rows,
};

/// Work requests or completions per batch of the driver benchmark.
const BATCH: f64 = 32.0;

/// LUTs of the XC7VX690T, the Virtex-7 of the NetFPGA SUME board (108,300 slices of 4 LUTs).
const XC7VX690T_LUTS: f64 = 433_200.0;

fn driver_rows(o: &Outputs) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (group, api, raw, figure_name, what, unit, floor) in [
        (
            "post_send",
            "api_32_doorbell",
            "baseline_raw_ring_32_doorbell",
            "post_send: 32 Writes, one doorbell",
            "the same descriptors copied into the ring, one fence and doorbell",
            "M WR/s",
            20.0,
        ),
        (
            "poll_cq",
            "api_32",
            "baseline_raw_cqe_32",
            "poll_cq: 32 completions",
            "the same CQE reads and one doorbell, no decoding",
            "M CQE/s",
            50.0,
        ),
    ] {
        let api_ns = o.criterion_median_ns(&format!("{group}/{api}"))?;
        let raw_ns = o.criterion_median_ns(&format!("{group}/{raw}"))?;
        rows.push(
            Row::new(
                figure_name,
                BATCH / api_ns * 1e3,
                unit,
                same_run(what, BATCH / raw_ns * 1e3),
            )
            .note(format!(
                "criterion medians {} ns and {} ns per batch; the driver's target is >= {} {unit}",
                figure(api_ns),
                figure(raw_ns),
                number(floor, 0)
            ))
            .headline(),
        );
    }
    Ok(rows)
}

/// The rows of the Markdown table `synth.sh` prints: block, LUT, FF, BRAM, LUTRAM, time.
fn synth_table(log: &str) -> Vec<[String; 6]> {
    log.lines()
        .filter_map(|l| {
            let cells: Vec<String> = l
                .trim()
                .strip_prefix('|')?
                .strip_suffix('|')?
                .split('|')
                .map(|c| c.trim().to_owned())
                .collect();
            let cells: [String; 6] = cells.try_into().ok()?;
            cells[1].parse::<u64>().ok()?;
            Some(cells)
        })
        .collect()
}

fn rtl_rows(o: &Outputs) -> Result<Vec<Row>, String> {
    let table = synth_table(&o.log);
    if table.is_empty() {
        return Err("no synthesis table in the output".into());
    }
    table
        .iter()
        .map(|[block, lut, ff, bram, lutram, time]| {
            let luts: f64 = lut
                .parse()
                .map_err(|_| format!("{block}: LUT count {lut:?}"))?;
            let row = Row::new(
                format!("{block} LUTs"),
                luts,
                "LUT",
                capacity("an XC7VX690T (NetFPGA SUME)", XC7VX690T_LUTS),
            )
            .note(format!(
                "{ff} flip-flops, {bram} block RAMs, LUT RAM {lutram}; Yosys took {time}"
            ));
            Ok(if block == "ev_sprayer" {
                row.headline()
            } else {
                row
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synth_table_is_read() {
        let log = "\
| block | LUT | FF | BRAM (RAMB18/36) | LUTRAM | Yosys wall time |
|---|---:|---:|---:|---:|---:|
| csr_event_queue | 94 | 100 | 0 | 43 RAM32M | 5 s |
| ev_sprayer | 16005 | 3061 | 0 | 6 RAM256X1S | 163 s |
";
        let t = synth_table(log);
        assert_eq!(t.len(), 2);
        assert_eq!(t[1][0], "ev_sprayer");
        let o = Outputs::for_test(&std::env::temp_dir(), log, 0.0);
        let rows = rtl_rows(&o).unwrap();
        assert_eq!(rows[1].value, 16_005.0);
        assert!(rows[1].headline && !rows[0].headline);
        assert!(rows[0].note.contains("43 RAM32M"));
        let empty = Outputs {
            log: "yosys: command not found".into(),
            ..o
        };
        assert!(rtl_rows(&empty).is_err());
    }
}
