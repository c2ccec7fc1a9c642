//! The dm-integrity metadata target: the input is a superblock area
//! (4 KiB), the number of the first journal section that follows
//! (32-bit little-endian), and journal sections as they lie on a device. A
//! superblock that parses must write back byte for byte; its geometry, on
//! devices of a few sizes, must place every block's data and tag on the
//! device, tags before the data of their run; the sections that follow
//! are parsed with the superblock's layout, and their summaries, replay
//! writes, entry blocks and MAC inputs computed, then fed to the replay
//! plan in every mode. Inputs whose superblock does not parse still drive
//! the replay plan with summaries read from their bytes.

use rampart_luks::integrity::geometry::BitmapLayout;
use rampart_luks::integrity::{
    replay_plan, Geometry, JournalSection, Mode, SectionSummary, Superblock, SUPERBLOCK_BYTES,
};

/// At most this many sections are parsed from one input.
const MAX_SECTIONS: usize = 16;

pub(crate) fn exercise(data: &[u8]) {
    match Superblock::parse(data) {
        Ok(sb) => with_superblock(data, &sb),
        Err(e) => {
            let _ = e.to_string();
            plan_from_bytes(data);
        }
    }
}

fn with_superblock(data: &[u8], sb: &Superblock) {
    let n = data.len().min(SUPERBLOCK_BYTES);
    let written = sb.to_bytes();
    assert_eq!(&written[..n], &data[..n], "superblock not written back byte for byte");
    assert!(written[n..].iter().all(|&b| b == 0), "bytes past the input must be zero");
    let again = Superblock::parse(&written[..]).expect("a written superblock parses");
    assert_eq!(&again, sb);
    let _ = format!("{sb:?}");
    let _ = sb.version_for(true);

    // Devices just large enough, twice as large, and the largest.
    let start = u64::from(data.get(SUPERBLOCK_BYTES - 1).copied().unwrap_or(0));
    let provided = sb.provided_data_sectors;
    for device in [
        provided.saturating_add(provided / 8).saturating_add(4096),
        provided.saturating_mul(2),
        u64::MAX / 512,
    ] {
        let _ = Geometry::provided_data_sectors_for(sb, start, device.min(1 << 40));
        let Ok(g) = Geometry::new(sb, start, device) else { continue };
        let block = u64::from(g.block_bytes());
        let device_bytes = device.saturating_mul(512);
        let last = (g.provided_data_sectors - 1) & !(u64::from(sb.sectors_per_block()) - 1);
        let li = g.log2_interleave_sectors;
        for sector in [0, last, last.min(1u64 << li), last & !((1u64 << li) - 1)] {
            let loc = g.locate(sector).expect("a provided block has a place");
            assert!(loc.data_offset.checked_add(block).is_some_and(|e| e <= device_bytes));
            let run_data = loc.data_offset - loc.sector_in_area * 512;
            assert!(loc.tag_offset + u64::from(g.tag_size) <= run_data, "tag past its run's data");
            // The first run's tags start right after the journal.
            assert!(loc.area > 0 || loc.tag_offset >= g.superblock_offset() + g.initial_bytes());
            assert!(loc.sectors_left_in_area >= 1);
        }
        assert!(g.locate(g.provided_data_sectors).is_err());
        assert!(g.end_offset() <= device_bytes);
        let bitmap = BitmapLayout::of(&g, 0);
        let _ = bitmap.bit_of(last);
        let _ = BitmapLayout::from_superblock(&g, sb);
        journal(data, sb, &g);
        break;
    }
}

fn journal(data: &[u8], sb: &Superblock, g: &Geometry) {
    let layout = g.journal;
    let rest = data.get(SUPERBLOCK_BYTES..).unwrap_or_default();
    let Some((first, rest)) = rest.split_first_chunk::<4>() else { return };
    let first = u32::from_le_bytes(*first);
    let mut summaries = Vec::new();
    for (i, raw) in rest.chunks_exact(layout.section_bytes()).take(MAX_SECTIONS).enumerate() {
        let index = first.wrapping_add(i as u32);
        let section = JournalSection::parse(raw, index, &layout).expect("a whole section parses");
        summaries.push(section.summary());
        for w in section.replay_writes(g) {
            assert!(w.sector < g.provided_data_sectors);
            let block = section.entry_block(raw, &layout, w.entry).expect("an entry has a block");
            assert_eq!(block.len(), g.block_bytes() as usize);
        }
        let _ = section.mac_input(sb);
    }
    if let Some(short) = rest.get(..rest.len() % layout.section_bytes()).filter(|s| !s.is_empty()) {
        assert!(JournalSection::parse(short, 0, &layout).is_err());
    }
    plans(&summaries);
}

/// Summaries read straight from the input's bytes, for the replay logic
/// alone.
fn plan_from_bytes(data: &[u8]) {
    let summaries: Vec<SectionSummary> = data
        .chunks_exact(2)
        .take(64)
        .map(|c| {
            let seqs = [c[0] & 1 != 0, c[0] & 2 != 0, c[0] & 4 != 0, c[0] & 8 != 0];
            let uniform = (c[1] & 4 != 0).then_some(c[1] & 3).filter(|&k| seqs[usize::from(k)]);
            SectionSummary {
                seqs,
                uniform,
                unknown_commit_id: c[0] & 16 != 0,
                has_entries: c[0] & 32 != 0,
            }
        })
        .collect();
    plans(&summaries);
}

fn plans(summaries: &[SectionSummary]) {
    let n = summaries.len() as u32;
    for mode in [Mode::Journal, Mode::Bitmap, Mode::Direct] {
        match replay_plan(summaries, mode) {
            Ok(plan) => {
                assert!(n > 0);
                if let Some((first, count)) = plan.replay {
                    assert!(first < n && count <= n);
                }
                assert!(plan.next_section < n && plan.next_commit_seq < 4);
                if let Some(clear) = plan.clear {
                    assert!(clear.first_section < n && clear.seq < 4);
                }
            }
            Err(_) => assert_eq!(n, 0),
        }
    }
}
