//! Accounting: what each segment of local work, each PostgreSQL cost region and each modelled
//! computation adds to a task's virtual clock, under which class, and the statistics of a run.
//! Methods of the executor's state ([`crate::state::Exec`]); no lock.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::panic::Location;

use crate::machine::{PS_PER_NS, ps};
use crate::segments::{SegmentCost, SegmentSource, SegmentTable, file_pair};
use crate::state::{Exec, State, UNCLASSIFIED};
use crate::stats::{CacheStats, LineStats, RegionStats, SimStats, TaskStats, TimeSources};

impl Exec {
    /// Interns a call site.
    pub(crate) fn site(&mut self, loc: &'static Location<'static>) -> u32 {
        let key = loc as *const Location<'static> as usize as u64;
        if let Some(&id) = self.site_ids.get(&key) {
            return id;
        }
        let id = self.site_names.len() as u32;
        self.site_names.push(format!("{}:{}:{}", loc.file(), loc.line(), loc.column()));
        self.site_ids.insert(key, id);
        id
    }

    /// Charges `cost` ps of execution to the current task, under its wait class if it has one.
    pub(crate) fn charge(&mut self, id: u32, cost: u64) {
        let t = &mut self.tasks[id as usize];
        t.clock += cost;
        match t.wait_class {
            None => t.running_ps += cost,
            Some(c) => *t.spinning_ps.entry(c).or_insert(0) += cost,
        }
    }

    /// Charges `cost` ps of spinning (a pause) to the current task.
    pub(crate) fn charge_spin(&mut self, id: u32, cost: u64) {
        let t = &mut self.tasks[id as usize];
        t.clock += cost;
        *t.spinning_ps.entry(t.wait_class.unwrap_or(UNCLASSIFIED)).or_insert(0) += cost;
    }

    /// Charges the local work since the task's previous operation (the segment ending at
    /// `site`, whose end the host's cycle counter read as `end_ticks`), and counts the
    /// operation.
    pub(crate) fn enter(&mut self, id: u32, site: u32, end_ticks: u64) {
        self.events += 1;
        let from = self.tasks[id as usize].last_site;
        let key = (u64::from(from) << 32) | u64::from(site);
        let cost = if let Some(measured) = &mut self.measured {
            let t = &self.tasks[id as usize];
            let raw = t.seg_start.map_or(0.0, |s| end_ticks.saturating_sub(s) as f64 * self.ns_per_tick);
            let mut host_ns = (raw - self.segment_overhead_ns).max(0.0);
            let e = measured.entry(key).or_insert((0.0, 0));
            if e.1 >= 16 && host_ns > 50_000.0 && host_ns > 50.0 * e.0 / e.1 as f64 {
                host_ns = e.0 / e.1 as f64;
                self.clipped_segments += 1;
            }
            e.0 += host_ns;
            e.1 += 1;
            ps(host_ns * self.m.speed_factor)
        } else {
            let (c, found) = match self.seg_cache.get(&key) {
                Some(&v) => v,
                None => {
                    let name =
                        format!("{} -> {}", self.site_names[from as usize], self.site_names[site as usize]);
                    // A key whose lines moved since the table was made falls back to the mean
                    // of the segments between the same two files, then to the median.
                    let v = match self.table.segments.get(&name) {
                        Some(s) => (ps(s.ns * self.m.speed_factor), SegmentSource::Exact),
                        None => match self.file_pairs.get(&file_pair(&name)) {
                            Some(&ns) => (ps(ns * self.m.speed_factor), SegmentSource::FilePair),
                            None => (self.default_segment_ps, SegmentSource::Default),
                        },
                    };
                    self.seg_cache.insert(key, v);
                    v
                }
            };
            match found {
                SegmentSource::Exact => self.segments_from_table += 1,
                SegmentSource::FilePair => self.segments_by_file_pair += 1,
                SegmentSource::Default => {
                    self.segments_at_default += 1;
                    if self.tasks[id as usize].region_depth == 0 {
                        self.sources.untimed += c;
                    }
                }
            }
            c
        };
        // Inside a PostgreSQL cost region the region's own count stands for this code.
        let cost = if self.tasks[id as usize].region_depth > 0 {
            self.sources.replaced += cost;
            0
        } else {
            self.sources.own += cost;
            cost
        };
        self.charge(id, cost);
        self.tasks[id as usize].ops += 1;
        self.tasks[id as usize].last_site = site;
    }

    /// The running task enters region `name`: returns whether it is charged (`--costs
    /// postgres` and the table has it).
    pub(crate) fn region_enter(&mut self, id: u32, name: &'static str) -> bool {
        let Some(rates) = &self.pg_rates else { return false };
        let key = name.as_ptr() as u64 ^ ((name.len() as u64) << 48);
        let known = *self.region_cache.entry(key).or_insert_with(|| rates.get(name).copied());
        if known.is_none() {
            self.sources.unknown_regions.insert(name);
            return false;
        }
        self.tasks[id as usize].region_depth += 1;
        true
    }

    /// The running task leaves region `name` (accepted by [`Exec::region_enter`]) after
    /// `items` items: charges PostgreSQL's count for it.
    pub(crate) fn region_exit(&mut self, id: u32, name: &'static str, items: u64) {
        let key = name.as_ptr() as u64 ^ ((name.len() as u64) << 48);
        let Some(Some((fixed, per))) = self.region_cache.get(&key).copied() else { return };
        let t = &mut self.tasks[id as usize];
        t.region_depth = t.region_depth.saturating_sub(1);
        let cost = ((fixed + per.saturating_mul(items)) as f64 * self.pg_rate_scale).round() as u64;
        self.sources.postgres += cost;
        let e = self.regions.entry(name).or_insert((0, 0));
        e.0 += 1;
        e.1 += cost;
        self.charge(id, cost);
    }

    /// Charges region `name`'s count now, replacing nothing ([`crate::task::region_charge`]).
    pub(crate) fn region_charge(&mut self, id: u32, name: &'static str) {
        let Some(rates) = &self.pg_rates else { return };
        let key = name.as_ptr() as u64 ^ ((name.len() as u64) << 48);
        let known = *self.region_cache.entry(key).or_insert_with(|| rates.get(name).copied());
        let Some((fixed, _)) = known else {
            self.sources.unknown_regions.insert(name);
            return;
        };
        let cost = (fixed as f64 * self.pg_rate_scale).round() as u64;
        self.sources.postgres += cost;
        let e = self.regions.entry(name).or_insert((0, 0));
        e.0 += 1;
        e.1 += cost;
        self.charge(id, cost);
    }

    /// Charges `cost` ps of modelled work that is no code of the lock stack ([`crate::task::compute`]).
    pub(crate) fn charge_modelled(&mut self, id: u32, cost: u64) {
        self.sources.modelled += cost;
        self.charge(id, cost);
    }

    /// The run's statistics: the `top` hottest lines, every task's time by state, where the
    /// time came from; `mode` names the clock mode.
    pub(crate) fn stats(&self, top: usize, mode: &str) -> SimStats {
        let mut lines: Vec<(&u64, &crate::machine::Line)> = self.lines.map.iter().collect();
        lines.sort_by_key(|(_, l)| (Reverse(l.transfers), l.first_touch));
        let line_stats = |line: u64, l: &crate::machine::Line| LineStats {
            name: self.line_names.get(&line).cloned().unwrap_or_else(|| format!("line #{}", l.first_touch)),
            addr: line << crate::machine::LINE_SHIFT,
            transfers: l.transfers,
            invalidations: l.invalidations,
            memory_fills: l.memory_fills,
            refills: l.refills,
            llc_fills: l.llc_fills,
            accesses: l.accesses,
        };
        let hot_lines = lines
            .iter()
            .take(top)
            .filter(|(_, l)| l.transfers > 0)
            .map(|&(&line, l)| line_stats(line, l))
            .collect();
        let mut missed: Vec<(&u64, &crate::machine::Line)> =
            self.lines.map.iter().filter(|(_, l)| l.transfers + l.memory_fills + l.llc_fills > 0).collect();
        missed.sort_by_key(|(_, l)| l.first_touch);
        let missed_lines = missed.iter().map(|&(&line, l)| line_stats(line, l)).collect();
        let caches = self.lines.caches.as_ref().zip(self.profile_caches.as_ref()).map(|(c, p)| CacheStats {
            private_kib: p.private_kib,
            private_ways: p.private_ways,
            llc_kib: p.llc_kib,
            llc_ways: p.llc_ways,
            private_evictions: c.private_evictions,
            llc_evictions: c.llc_evictions,
            back_invalidations: c.back_invalidations,
        });
        let ns = |p: u64| (p as f64 / PS_PER_NS).round() as u64;
        let tasks = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| TaskStats {
                id: i as u32,
                name: t.name.clone(),
                ops: t.ops,
                running_ns: ns(t.running_ps),
                spinning_ns: t.spinning_ps.iter().map(|(k, v)| (k.to_string(), ns(*v))).collect(),
                waiting_ns: t.waiting_ps.iter().map(|(k, v)| (k.to_string(), ns(*v))).collect(),
                sleeping_ns: ns(t.sleeping_ps),
                joining_ns: ns(t.joining_ps),
                runnable_ns: ns(t.runnable_ps),
                finished: t.state == State::Finished,
                panicked: t.panicked,
            })
            .collect();
        let mut stats = SimStats {
            machine: self.m.name.clone(),
            clock_mode: mode.to_string(),
            virtual_ns: ns(self.end_time),
            virtual_seconds: self.end_time as f64 / 1e12,
            events: self.events,
            context_switches: self.context_switches,
            preemptions: self.preemptions,
            parks: self.parks,
            wakes: self.wakes,
            max_running: self.max_running,
            caches,
            misses_by_structure: BTreeMap::new(),
            missed_lines,
            lines_touched: self.lines.map.len() as u64,
            transfers: self.lines.map.values().map(|l| l.transfers).sum(),
            segments_from_table: self.segments_from_table,
            segments_at_default: self.segments_at_default,
            segments_by_file_pair: self.segments_by_file_pair,
            time_sources: TimeSources {
                costs: if self.pg_rates.is_some() { "postgres" } else { "own" }.to_string(),
                own_code_ns: ns(self.sources.own),
                untimed_ns: ns(self.sources.untimed),
                replaced_own_ns: ns(self.sources.replaced),
                postgres_ns: ns(self.sources.postgres),
                modelled_ns: ns(self.sources.modelled),
                regions: self
                    .regions
                    .iter()
                    .map(|(k, &(calls, p))| (k.to_string(), RegionStats { calls, ns: ns(p) }))
                    .collect(),
                unknown_regions: self.sources.unknown_regions.iter().map(|s| s.to_string()).collect(),
                postgres_ipc: self.pg_rates.is_some().then(|| self.profile_ipc / self.pg_rate_scale),
            },
            hot_lines,
            tasks,
        };
        stats.group_misses(|_| None);
        stats
    }

    /// The segment table a measured run filled (empty in deterministic mode).
    pub(crate) fn segment_table(&self) -> SegmentTable {
        let mut out = SegmentTable::default();
        if let Some(measured) = &self.measured {
            for (&key, &(sum, n)) in measured {
                let (from, to) = ((key >> 32) as usize, (key & 0xffff_ffff) as usize);
                let name = format!("{} -> {}", self.site_names[from], self.site_names[to]);
                let e = out.segments.entry(name).or_insert(SegmentCost { ns: 0.0, samples: 0 });
                let total = e.ns * e.samples as f64 + sum;
                e.samples += n;
                e.ns = if e.samples == 0 { 0.0 } else { total / e.samples as f64 };
            }
        }
        out
    }
}
