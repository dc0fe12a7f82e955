//! Cost of the whole MRC pipeline per delivered packet.
//!
//! Delivers exactly 1,000,000 data packets from NIC A to NIC B over 256 EVs on 4 planes with 1 %
//! loss (seed 1), through the real datapath models, engines and the test-kit channel, and prints
//! one JSON object: `delivered_packets` and the count of each event kind.
//!
//! Measured (seed 1, x86-64 release, callgrind, this machine): 286,286,620 instructions for
//! the whole program, i.e. **~286 instructions per delivered packet**, within the budget of 300
//! (met since 2026-12-03's sixth session). History: ~1,905, then 1,227 (before the stuck-PSN fix); the fix and the per-PSN
//! EV delivery credit added work (and finish the run in 65.9 ms of virtual time instead of
//! 90.1 ms: tail losses now repair from `una` first), skip-once bookkeeping without a 256-EV
//! scan, a timer wheel that returns at once when nothing is due, ACKs that apply only new
//! SACK bits and a leaner responder return took it to 1,244. Then, each step re-measured on
//! the same machine with the same JSON output (the run itself is unchanged, only its cost;
//! the exceptions are marked):
//!
//! | step | instructions / packet |
//! |---|---|
//! | baseline | 1,244 |
//! | sprayer chains only usable EVs per plane (about 2/3 of the 256 EVs are retired at any time in this run) and picks without the general scan | 1,221 |
//! | `Engine::handle_tx_packet` (receive the sender's descriptor, no `MrcRepr`), word-wise RX bitmap advance, ACK timer re-armed only when a coalescing interval opens, channel short path when only loss is configured | 1,153 |
//! | fast paths for the common packet: `Responder::handle_write_fast` (then only for packets that trigger no ACK), `Requester::send_new_fast` | 1,024 |
//! | `Ring` (head + length FIFO) instead of `heapless::Deque` for the send, retransmission and control queues; in-order arrivals step `cum` directly; engine-level transmit fast path | 976 |
//! | `Engine::poll_transmit_into` builds the packet in the channel's FIFO slot (`Channel::send_with`); one pass for the cumulative ACK | 927 |
//! | the receive fast path also takes the packets that trigger an ACK | 911 |
//! | the receive fast path locates the PSN in the RX bitmap once; completion polls inlined | 889 |
//! | `handle_tx_packet`, `handle_timeout` (`TimerWheel::is_quiet`) and the channel's `pop_due_ref`: an inline fast check, the general part out of line | 857 |
//! | per-PSN send time (16-byte TX slots), newest delivered send time, tail-loss-probe arming (RACK loss inference for sprayed traffic) | 890 |
//! | one timer-bookkeeping helper for both send paths (was written twice) | 892 |
//! | the gray-loss test takes deliveries lazily: a per-EV pending count (in the entry's padding) fed in one O(1) step (`Sprt::observe_each_delivered`, exactly the one-by-one result) before the EV's next loss | 879 |
//! | **behaviour change:** the gray-loss test weighs an EV against the QP-wide loss rate (see below) | 865 |
//! | `Engine::poll_transmit_batch` + `Channel::send_batch_with`: runs of new packets from one QP built in the channel's free FIFO slots (packets and metadata in separate arrays), the QP lookup and timer bookkeeping once per run; the stream's receive without a closure call per packet | 840 |
//! | `Requester::send_new_run`: the work request, error state and retransmission queue checked once per run, each descriptor written straight into its slot; the sprayer's common pick inlined | 813 |
//! | EV sync after a received packet only when an EV event or served skip waits; the channel's loss draw against a precomputed threshold (`Rng::chance_threshold`, same draw and result) | 802 |
//! | `Engine::handle_tx_batch` + `Channel::pop_due_run`: a run of due plain packets for one NIC handed over at once (the write fast path runs in the loop, no call per packet); an ACK's deliveries counted once for the QP-wide rate | 776 |
//! | the stream posts again only after a completion freed a send-queue slot (every attempt on a full queue was refused) | 772 |
//! | QPs of one engine take turns in bursts of 4 packets (the simulator's fairness fix): the turn bookkeeping per packet and a scan for another QP with send work per transmit run (a run is capped at the burst only when one waits) | 786 |
//! | `Engine::rx_write_run`: a run of quiet writes (consecutive PSNs to one QP, no immediate or ACK request, each new and placed, none calling for an ACK) taken at once: RX bitmap word-wise (`RxBitmap::run_is_new` / `receive_new_run`, proptested against one by one), the ACK generator's count once (`AckGen::handle_quiet_run`), the ACK timer synced once; per packet only the placement check | 675 |
//! | `send_new_run` decides the work request, window and offset limits once per run (two divisions instead of per-packet overflow checks) and checks the CC window against a hoisted `cwnd` | 661 |
//! | the turn advances once per transmit run (`next_tx_slot_after`, not `next_tx_slot` in a loop), the run's packets from a shared header template, a quick look before the general completion poll (`Requester/Responder::completion_waits`) | 643 |
//! | the receive run also takes the packet that calls for the ACK (its ACK request or the coalescing count; `AckGen::handle_trigger`) and queues the ACK | 634 |
//! | the CC window's packet count taken once per run (no per-packet check), first/last segments precomputed | 625 |
//! | `send_new_run` returns before its setup when the send window or the work request has no room, reads the work request in place, checks the CC window before anything else | 614 |
//! | the channel's batch send draws losses in a local generator, moves packets only after the first loss and writes only each slot's destination and time (trim and CE stay clear on the short path) | 605 |
//! | a waiting control packet goes from its queue straight into the transmit slot; a QP whose CC window is closed reports its stall without the fast path's and `peek`'s checks | 601 |
//! | the cumulative ACK walks the TX slots by ring index (when `WIN` divides the PSN space) | 597 |
//! | each packet of a transmit run is the one before with the differing fields changed; the per-run timer bookkeeping call only when it has something to do | 592 |
//! | a transmit batch ends without the general pass, and before the fast path, when no QP can send (`Requester::idle_stall`: ERROR, CC window closed, nothing queued, send window full; the stalls counted as that pass counts them) | 572 |
//! | the channel's batch send returns at once when the engine filled no slot | 567 |
//! | merged with main: retransmissions ahead of the turn and shared route knowledge (main itself measured 792 in the same session, the JSON the same but `ram_engine_bytes` 81,496 -> 81,520 for the retransmission queue); the no-sender shortcut only when no retransmission is queued ahead of the turn | 568 |
//! | the cumulative ACK's slot index steps by a mask (`WIN` is a power of two when it divides the PSN space) | 566 |
//! | the receive run's placement checks count the placed packets once per run (`Regions::write_ok_uncounted` + `count_placed`) | 563 |
//! | an ACK's SACK-bit and hole loops take the in-flight PSNs as one mask (`Requester::in_flight_mask`, tested bit by bit against `in_flight_range`) instead of a range check per bit | 562 |
//! | each packet of a transmit run is copied from the slot before (the run's first from the template) and only its differing fields written: the header fields the run shares leave the loop's registers (the loop spilled them) | 547 |
//! | `Engine::poll_transmit_batch` makes its idle check inline and calls the loop (`poll_transmit_batch_loop`, out of line) only when a QP may send: 182,335 of the run's 225,527 polls end there (stall counters checked identical); the loop skips the check until the fast path's first try | 533 |
//! | the transmit run adds its bytes in flight once per run; the packet length is taken as `u16` directly (`mtu` is clamped to 65,535) | 530 |
//! | merged with NSCC following the reference (htsim's `UecSrc`: delay average, fair/proportional/fast/additive increase, quick adapt). JSON: virtual time 70.13 -> 69.53 ms, retransmits 14,696 -> 14,612, duplicates 4,835 -> 4,692, probes 9,860 -> 9,909, `ram_per_qp_bytes` 36,552 -> 36,632 (the controller's new state), the rest within 0.5 % | 533 |
//! | **behaviour change** (issue 5's default run): ACKs and NACKs travel on an EV the QP's sprayer picks (one pick per ACK), and the ACK generator answers an ACK request again when the last hole under it fills. JSON: virtual time 69.53 -> 71.25 ms, retransmits 14,612 -> 14,939, ACKs 82,205 -> 82,821, duplicates 4,692 -> 5,088, `ctrl_dropped` 153 -> 205, `ram_per_qp_bytes` 36,632 -> 36,640, the rest within 1 % | 543 |
//! | QPs built in place: an engine's QP slot is a flag and room for one QP (`QpSlot`, was `Option<Qp>`), creating a QP and INIT write the QP and its EV table where they live (for the NIC core's stack: 81 -> 16.5 KiB on the admin path). Same JSON but `ram_engine_bytes` 81,696 -> 81,712 (the flag's alignment) | 541 |
//! | **channel change:** the test-kit channel draws its independent losses as geometric gaps (`engine::rng::LossGaps`: one 64-bit draw per loss against a table of `(1 - p)^k`, instead of one draw per packet; the same per-packet distribution, its own generator). Another loss pattern of the same rate, so the JSON changed: `channel_lost` 10,843 -> 11,256 of 1,117,325 -> 1,119,302 sent (0.970 % -> 1.006 %), virtual time 71.25 -> 71.81 ms, retransmits 14,939 -> 15,546, ACKs 82,821 -> 83,522, duplicates 5,088 -> 5,367, probes 9,838 -> 10,159, the RAM figures the same | 526 |
//! | the receive run checks placement once for the run when its payloads are one span of one rkey (the scan pass compares each packet's rkey, address and length with the span so far; otherwise packet by packet as before), tested against one packet at a time for runs crossing the region's end, jumping past it, changing rkey and wrapping the address space. Same JSON | 517 |
//! | the sprayer's summaries updated in O(1) on a firmware write (a 16-bit set of usable weights per plane: its highest bit is the largest weight, its emptiness says the plane has no usable EV; no histogram sums and scans, no second recomputation of the same plane). Same JSON but `ram_per_qp_bytes` 36,640 -> 36,632 (the usable count per plane is gone) | 514 |
//! | the sender's ACK path, 13 steps measured one by one (516.9 -> 491.8 on their own, 490.5 with the row above): a delivery bumps only the EV's pending count for the gray-loss test (`delivered` is settled when they are fed to it); an ACK goes from `handle_tx_packet` straight to `rx_ack` (no general header representation); one `AckTally` for the cumulative walk and the SACK bits (the per-PSN logic once, the totals applied once); the cumulative walk over the TX slot ring as two slices; `EvTable::credits()` looks up the EV range and the test's configuration once per ACK instead of once per PSN; the EV sync check inline and the sync out of line; `EvTable::handle_ack` skips the delivery counters when an ACK reports none; a retired EV's probe order updated once; plane weights written only when they change. Same JSON | 490 |
//! | timers, retransmissions, the channel and the main loop, 15 steps measured one by one (516.9 -> 490.0 on their own): probes go straight into the control queue; the timer wheel's quiet check and `arm` compare nanoseconds (no division by the tick), `next_deadline` of a level-0 bucket is its tick and answers from an exact quiet bound; a retransmission reads its candidate where `peek` wrote it; the channel keeps one metadata entry per send batch and a due run steps over whole batches; the stream drains each NIC's events and completions once per NIC and takes its wake-up instant directly. Same JSON | 464 |
//! | the data receive path, 15 steps measured one by one (464.2 -> 431.5): a receive run ends before a packet that does not continue its payload span (one placement check per run; a span that fails placement goes one packet at a time); the ACK trigger taken with the run (`AckGen::handle_acked_run`, `Responder::accept_write_run_acked`: the RX bitmap word-wise and the interval once for all its packets, then the ACK); the ACK pushed as it is built, written straight into the control ring's slot; the scan over the first `room + 1` packets, PSNs compared without the 24-bit wrap (a run ends at the wrap); the ACK's SACK from `RxBitmap::sack_at_cum` (proptested equal to `sack(cum_psn)`); an inline look at the ACK timer before `sync_timer` (73,952 of 74,310 syncs end there); `run_is_new` answers at once for a run beyond `next_max`; a packet opening a gap taken as a run of one; forced inlining, each measured (`receive_new_run`, placement's `check` and `find`, `emit`, `ack_packet`, `ack_travel_ev`, `ack_packet_on`). Same JSON | 431 |
//! | the transmit run, 13 steps measured one by one (464.2 -> 421.4 on their own; with the receive row above 389.0): the PSN, transmission number and bytes in flight derived from the packet count (no loop-carried counters); no offset in the loop (each packet's addresses the one before's plus `mtu`; every packet carries `mtu` bytes and the one short packet, always the run's last when reached, is fixed after the loop in its descriptor and TX slot); the segment, ACK request and `Last` written only where the run stops, the first packet marked after the loop; one stop index for "last packet of the message" and "served a skip flag" (the skip count checked only after a general pick: the common pick never serves one); the sprayer's plane wrap (one pick in `P`) a cold branch instead of a select on every pick; each TX slot from a per-run template; a run that ends its work request with room left goes on with the next work request's run at once (`poll_new_batch`); the run loop out of line in `Qp::poll_new_run` (its own registers). The loop is ~88 instructions a packet (was ~132). Same JSON | 389 |
//! | the data path again, 6 steps (389.0 -> 380.9): the sprayer keeps each plane's eligible weight as a derived array (one load per pick; in the struct's padding) and clears an unusable slot's chain link (the common pick drops its usable test: a link of 0 already sends it to the general pick; the proptest against a plain scan passes); the receive run hands the gap it computed to `write_run_offset` and `AckGen::handle_acked_run` (debug-asserted equal) and drops a bound the span check covers; each TX slot written as one value (the loop 88 -> 82 a packet). Then completions read the head work request in place, `peek_retx` finds a retransmission's work request with one compare each, and `EvTable::update_baseline` returns at once when the baseline still stands (380.9 -> 380.2); refusals for a full send queue counted again (they returned before the counter: 11,734 of the run's 74,234 posts; +0.1). Same JSON | 380 |
//! | timers and the general receive path, 5 steps (380.3 -> 377.5 on their own): a due level-0 bucket holding one timer fires it at once (no ready-list insert and unlink), `next_deadline`'s quick answer inline, the wheel's tick a `NonZeroU64` (no zero checks on divisions), a branch less in `next_event`; a duplicate or one-at-a-time write does not try the fast path twice. Same JSON | 377 |
//! | the transmit run's per-call setup, 7 steps (380.3 -> 372.2 on their own; with the row above 369.4): `send_new_run` takes the next work request's run itself (the error, retransmission and CC checks, the data counter and the timers once per call, not per work request); the CC-window and "a work request waits" checks first (28,462 of 43,343 calls send nothing) and `poll_new_batch` skips the call when the QP cannot start a run (`Requester::new_run_may_send`); no offset limit and no division for the short packet (every queued work request passed `packet_count` with the requester's fixed `mtu`; the short packet is always its last); the first and last segments built after the loop. The setup went from ~375 to ~299 instructions per sending run. Same JSON | 369 |
//! | last round (369.4 -> 362.9): `Ring::wrap` masks when the capacity is a power of two (every ring of the test kit: the slot's bounds check goes; the ring's model proptest runs for a power of two and not), `pop_front` reads through it; the receive run reads the ACK timer once and `write_run_offset` drops a check its caller guarantees (debug-asserted) and asks about an owed ACK only for an in-order run; the channel's `next_due` answers inline from the FIFO head and its batch send takes the free slots in two steps (the bounds checks fold). Same JSON | 363 |
//! | **behaviour change:** a loss window of one retransmission after an ACK timeout (`requester::RtoWindow`, TCP's loss window of RFC 5681 section 3.1): a timeout still requeues every unacknowledged PSN, `una` first, but only `una` leaves until the peer answers, whose ACK acknowledges what arrived and that no ACK could report (beyond the 64-bit SACK reach of a lost `una`). Before, each of the run's 154 timeouts sent ~36 PSNs at once, 5,367 of 5,598 of them already received. JSON: retransmits 15,546 -> 11,142, duplicates 5,367 -> 991, ACKs 83,522 -> 79,390, `ctrl_dropped` 234 -> 0, virtual time 71.81 -> 72.05 ms. (A reach rule that also held back PSNs beyond the SACK reach after the answer took duplicates to 76 but the run to 73.49 ms: not kept.) | 355 |
//! | the test-kit stream polls an engine only after an input (a packet, a timer that acted, a posted work request): a transmit or drain that found nothing finds nothing again until then, as a NIC's main loop polls its engine on a doorbell, a packet or a timer (`Engine::handle_timeout` says whether a timer acted). Same JSON | 341 |
//! | **harness fix:** what a timer queues (an ACK, a probe, retransmissions) leaves at the timer's instant; the stream went on to the next event first (`testkit::pair` already did this right), which delayed every timer-driven packet, an RTO's by up to a whole further timeout. JSON: virtual time 72.05 -> 62.62 ms, retransmits 11,142 -> 11,263, ACKs 79,390 -> 79,612, duplicates 991 -> 1,148, probes 10,187 -> 10,122, the rest within 0.5 % | 344 |
//! | the transmit run, 6 steps (362.9 -> 350.2 on their own): the common picks in an inner loop with no call in it (the general pick and the run's first packet in an outer loop), the first packet written before its pick, the work request's packet index as a masked PSN difference, the PSN carried as a counter; the loop ~70 a packet. Same JSON | 331 |
//! | the sprayer, 18 steps (362.9 -> 341.4 on their own), every pick unchanged (plain-scan proptest now also at N = 13, P = 3 and N = 1, 2; RTL co-simulation): each plane keeps its next candidate slot and each slot a pick weight (0 when unusable or skip-flagged), so one load and compare serves the common pick; indices masked when `N` is a power of two; the plane's last pick and first usable slot stored; a short path after a chain's end; writes touch only what a changed bit affects. The common pick ~19 (was ~27.5). JSON the same but `ram_per_qp_bytes` 36,632 -> 36,624 | |
//! | the sender's ACK path, 16 steps (362.9 -> 348.3 on their own; with the two rows above 299.1): one low-bits mask for the applied and in-flight SACK bits when the SACK starts at `una`; NSCC inlined, its delay average with one 128-bit product (`fixed::ewma_q16_unit_int`, tested equal), the EV RTT average in 64 bits when it fits; each EV counts the room left before the gray-loss test is fed (a credit is one decrement); the cumulative walk over a sub-slice; an in-flight slot taken on one compare. ~854 per ACK (was ~1,031). Same JSON | 299 |
//! | the receive data path, 17 steps (362.9 -> 354.1 on their own): a duplicate re-ACKed and dropped on the fast path (`Responder::handle_duplicate_fast`); a hole fill marked where the fast path located it; an ACK run's interval closed in one pass, its cause counted directly, its SACK without reading the ring when in order; raw 24-bit offset differences; the RX bitmap's run masks in one shift; the scan counting with its slice index (21 a packet, was 23). Same JSON | 292 |
//! | retransmissions and the rest of the transmit path, 11 steps (331.3 -> 325.1 on their own): `Requester::send_retx` (`peek` + `commit` for a retransmission in one step, no general candidate; ~332 per retransmission, was ~490), `poll_completion` polling the requester at `cq_rr` directly, `poll_transmit_batch_loop` calling `poll_retransmit` directly when one is queued, cheaper idle checks. Same JSON | 286 |
//! | one walk for the first wanted retransmission and one packet builder, shared by `peek_retx`, `send_retx` and `send_new_fast` (286,050,399 -> 286,180,368: a copy of both removed). Same JSON | 286 |
//! | review of the session's change: shared helpers where it had written logic twice (`AckGen::mark_run`/`with_run`, `Requester::record_sent`/`retransmitted`, `Sprayer::picked_on`, `Psn::offset_from`), `Engine::handle_timeout` saying whether a timer acted (286,180,368 -> 286,286,620). Same JSON | **286** |
//!
//! **The EV policy (the behaviour change).** MRC retires an EV on an untrimmed loss and probes
//! it back; beyond MRC, a sequential test (SPRT, `engine::sprt`) retires *gray* EVs for long
//! (probing at the 10 ms cap). Its hypotheses were fixed: H0 = 1e-4 loss, H1 = 1 %. At this
//! run's 1 % *uniform* loss every EV is "gray" by that test, so it retired EV after EV (2,093
//! gray retirements) until the `min_active` guard held the last 64 of 256 (6,441 guard hits):
//! the sprayer used a quarter of the paths. That is a policy defect: loss spread over every EV
//! is not any one EV's fault, and retiring EVs cannot avoid it. The test now takes its H0
//! from the QP's own loss rate `q` over about the last 16K outcomes (`p0 << k`, the smallest
//! such rate at or above `q`, at most 1/8) and H1 = `max(p1, 4 H0)`; while the QP loses no
//! more than `p0` it is the configured test, so the simulator's default run is unchanged
//! (byte-identical output). MRC's immediate retirement on an untrimmed loss is untouched: a
//! blackholed or dead EV still leaves at its first loss (the test kit's blackhole and
//! plane-death runs pass unchanged), and an EV losing ~4x more than the rest is still found
//! gray (`gray_ev_stands_out_of_uniform_loss`). In this run: no gray retirement, no guard hit,
//! all 256 EVs in use at the end; each loss retires its EV for one probe round trip (9,860
//! probes, 9,649 successful replies, 19,298 EV events). The JSON changed with it: virtual time
//! 67,589,536 -> 70,126,880 ns, retransmits 14,564 -> 14,696, probes 3,012 -> 9,860,
//! `timeouts_fired` 17,486 -> 22,628, `ctrl_dropped` 69 -> 175 (the 64-entry control queue
//! overflows in bursts of probes and ACKs; every drop is counted and recovered by the
//! protocol). ACK coalescing is unchanged (every 16 packets or 4 us, at once on a gap and on
//! the last packet of a message): a NIC acknowledging every 16 packets of a 4 KiB MTU stream is
//! within what RoCE NICs do, so it was not raised to cut cost.
//!
//! Tried and dropped (measured worse or no better): `lto = "fat"` + `codegen-units = 1` in the
//! release profile (1,206 -> 1,125 before the fast paths, but 972 -> 973 after them), a
//! branch-free `Psn::distance_from` (+18), a sprayer pick that wraps the EV chain without the
//! general scan (+3), forced inlining of the receive fast path (+3; again at 802: `#[inline(always)]`
//! on `handle_tx_packet` +19, on `rx_write_fast` inside the receive batch at 776: +28) and of
//! `poll_completion` (+2), the batch transmit calling the per-packet fast path in a loop (it
//! stopped being inlined: 865 -> 924 before `send_new_run`), placement's region lookup by
//! reference instead of by copy (no change). From 675 down (each against the step
//! before, same machine): the region looked up once per receive run instead of per packet
//! (+5 and +8: the inliner moved the run's helpers out of line), an early "is a plain write"
//! check before the receive run (+3 to +5, same cause; `#[inline(always)]` on the helpers:
//! +3), the transmit run in two phases (the EVs of a chunk first, then the packets: +4 to
//! +20; the packet loop alone still spills), the slots filled with the header template before
//! the per-field writes (+8), a `black_box`'d block copy of the packet (+22), several work
//! requests in one transmit run (+13), `send_new_run` out of line (+10: the same
//! 167-instruction loop), the SACK-bit loop with its totals in locals (+5),
//! `#[inline(always)]` on the no-sender check (+12), NSCC's two 128-bit divisions done in 64
//! bits when the dividend fits (+3). From 568 down: the transmit batch skipping the idle check
//! after every run that sent (+0.1), skipping it only on the loop's first pass (+7 against
//! skipping it until the fast path's first try), the TX slot index stepped by a mask in the
//! transmit run (+3), the segment choice reordered (+1.8), the placement check folded into
//! the receive run's scan pass (+1.5). From 526 (2026-12-03): a transmit run taking its
//! common picks at once (`Sprayer::fill_fast` into a local array, the rest one at a time: +8;
//! the batch pick itself ~30 instructions a pick out of line) and a pick that reports whether
//! it served a skip flag instead of the per-packet skip-counter check (+6; +32 when the pick
//! was not inlined). In the later steps (each against the step before, in millions of
//! instructions for the run): the sprayer's per-plane state as one array of structs (+3.6),
//! the cumulative walk as two slices before the ACK tally (+1.3), `#[inline]` on
//! `Requester::handle_ack` (+15.7), `ack_through` or the loss inference out of line (+8.4,
//! +7.4), walking only the PSNs the last SACK did not cover (+4.1), ACKs dispatched before the
//! receive run in `handle_tx_batch` (+8.6), the ACK built in place in the control ring through
//! a closure (+4.7; LLVM now writes it into the slot by itself), the next control, retransmitted
//! or new packet written straight into the channel slot on the general path (+9.7), the
//! stream's transmit loop written out per NIC (+2.9), the general pick moved out of the
//! transmit loop (+6.5), a transmit run ending when a common pick fails (+5.8, ~20K more
//! runs), counting the sprayer's common picks once per run (+1.7 to +12.9 in four forms), a
//! hole fill that answers an owed ACK taken as a run of one (+4.7: the scan grew by two
//! instructions a packet), and looping over consecutive runs of one QP inside the receive
//! run (+5.8).
//!
//! From 363 down (2026-12-03, sixth session), tried and dropped, against the step before:
//! in the transmit run, the inner loop with a range check per packet (+8.0 M), all work
//! requests of a call in one loop (+4.8 M), the inner loop out of line (+6.1 M: it still
//! reloads 4 spilled values a packet), a cold-path hint on the general pick (+6.5 M); in the
//! sprayer, plane eligibility folded into each plane's candidate (+3.5 M: the candidates were
//! rebuilt on 81,130 plane rounds); in the ACK path, the rare gray-loss sync out of line or
//! cold (+0.8 to +3.3 M: the call spills registers in the credit loops), a deferred sync
//! behind a flag (+4.0 to +7.0 M); in the receive scan, the QP and PSN compared as one 64-bit
//! key (+0.6 to +5.2 M), a running expected-PSN counter (+3.2 M), the scan out of line
//! (+3.2 M); for control packets, a copy loop with the count taken once (+0.8 M).
//!
//! Where the 286 go (inclusive, per delivered packet, `callgrind_annotate --inclusive=yes`,
//! 2026-12-03): transmit ~100, of which the transmit run ~77 (the loop ~70 a packet: the
//! sprayer's common pick ~19, the 88-byte descriptor copied slot to slot ~12, the TX slot ~12,
//! PSN and EV fields; ~300 of setup per sending run over ~77K), retransmissions ~4 (~332
//! each), control packets and the channel's send ~19; receive ~136, of which the sender's ACK
//! processing ~69 (~880 per ACK: about 22 per newly acknowledged PSN, ~250 fixed, NSCC ~95)
//! and the data runs, duplicates, probes and ACK building ~66 (the scan ~21 a packet); timers
//! ~13; the stream loop, posting (~5), completions and EV events the rest. What is left on the
//! per-packet loops is mostly moving the 88-byte `TxPacket` and picking an EV; a per-packet
//! descriptor of a few words (touching the channel, the receive API, the simulator's wire and
//! PCIe models and the NIC main loop) is the next structural step if the budget tightens.
//! RAM: one test-kit QP (256 EVs, 512-PSN windows, 32-entry queues) is 36,624 bytes, one EV 84
//! bytes (EV table entry + sprayer slot and its plane link), the whole 2-QP test-kit engine
//! 81,680 bytes (all printed by this example).
//!
//! An optional argument sets the packet count (default 1,000,000, the budgeted figure), for
//! quicker profiling runs.
//!
//! ```text
//! cargo run --release -p mrc-firmware --features testkit --example engine_cost
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \
//!     target/release/examples/engine_cost     # total instructions / delivered_packets
//! target/release/examples/engine_cost 100000  # a shorter run
//! ```

use core::mem::size_of;

use mrc_firmware::datapath::Sprayer;
use mrc_firmware::engine::ev_state::EvTable;
use mrc_firmware::engine::Qp;
use mrc_firmware::testkit::stream::{run_stream, StreamConfig};
use mrc_firmware::testkit::TkEngine;

/// RAM of one EV: its EV-table entry (state, statistics, probe state, event-queue slot) and its
/// sprayer slot, measured as the growth of the structs per EV.
fn ram_per_ev_bytes() -> usize {
    (size_of::<EvTable<256>>() - size_of::<EvTable<128>>()) / 128
        + (size_of::<Sprayer<256, 4>>() - size_of::<Sprayer<128, 4>>()) / 128
}

fn main() {
    // Optional first argument: the packet count (default 1,000,000, the budgeted figure).
    let mut cfg = StreamConfig::default();
    if let Some(n) = std::env::args().nth(1) {
        match n.parse() {
            Ok(n) => cfg.packets = n,
            Err(_) => {
                eprintln!("usage: engine_cost [PACKETS]");
                std::process::exit(2);
            }
        }
    }
    // Two engines and the channel live on the stack: give them room.
    let r = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || run_stream(cfg))
        .expect("spawn")
        .join()
        .expect("run");
    let (s, b, c) = (r.sender, r.receiver, r.channel);
    println!(
        concat!(
            "{{\"delivered_packets\":{},\"failed\":{},\"virtual_time_ns\":{},\"messages\":{},",
            "\"completions\":{},\"data_sent\":{},\"retransmits\":{},\"acks_sent\":{},",
            "\"nacks_sent\":{},\"duplicates_received\":{},\"out_of_window\":{},\"probes_sent\":{},",
            "\"probe_replies_sent\":{},\"probe_replies_ok\":{},\"ev_events\":{},\"timeouts_fired\":{},",
            "\"ctrl_dropped\":{},\"channel_sent\":{},\"channel_lost\":{},\"channel_overflow\":{},",
            "\"ram_per_qp_bytes\":{},\"ram_per_ev_bytes\":{},\"ram_engine_bytes\":{}}}"
        ),
        r.delivered_packets,
        r.failed,
        r.end_ns,
        r.messages,
        r.completions,
        s.data_sent,
        s.retransmits_sent,
        b.acks_sent,
        b.nacks_sent,
        b.rx_duplicate,
        b.rx_out_of_window,
        s.probes_sent,
        b.probe_replies_sent,
        s.probe_replies_ok,
        r.ev_events,
        s.timeouts_fired + b.timeouts_fired,
        s.ctrl_dropped + b.ctrl_dropped,
        c.sent,
        c.lost,
        c.overflow,
        // A QP of the test-kit engine: 256 EVs over 4 planes, 512-PSN windows, 32-entry queues.
        size_of::<Qp<256, 4, 512, 8, 32, 32>>(),
        ram_per_ev_bytes(),
        size_of::<TkEngine>(),
    );
    if r.failed || r.delivered_packets != cfg.packets {
        std::process::exit(1);
    }
}
