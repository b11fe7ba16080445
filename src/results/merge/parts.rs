//! How each part of a result merges: one `Merge` impl per part, each destructuring the other
//! shard's part to its last field and naming that field's rule (see [`super::rules`]).

use anyhow::{Result, anyhow};
use hdrhistogram::Histogram;

use super::rules::{
    Merge, all, any, by_parent, first, max, recomputed, same, sum, sum_known, sum_known_by,
    sum_some, weighted_mean,
};
use crate::results::causes::ByCause;
use crate::results::cost::{CostFigures, THIS_RUN, break_even};
use crate::results::l1::L1Figures;
use crate::results::shard::ShardFigures;
use crate::results::{
    Bucket, Consistency, DbFigures, DispatchLag, Generator, Histograms, LockFigures, Outcomes,
    RedisFigures, Requests, Staleness, decode_histogram, encode_histogram,
};

impl Merge for Requests {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let Requests {
            scheduled,
            completed,
            shed,
            unsent,
            errors,
            abandoned,
            warmup,
            timed_out,
            goodput,
            retries,
            attempts,
            amplification,
            retry_after_waits,
            retry_after_wait_ms_min,
        } = o;
        sum(&mut self.scheduled, scheduled);
        sum(&mut self.completed, completed);
        sum(&mut self.shed, shed);
        sum(&mut self.unsent, unsent);
        sum(&mut self.errors, errors);
        sum(&mut self.abandoned, abandoned);
        sum(&mut self.warmup, warmup);
        sum(&mut self.timed_out, timed_out);
        sum(&mut self.goodput, goodput);
        sum(&mut self.retries, retries);
        sum(&mut self.attempts, attempts);
        recomputed(&mut self.amplification, amplification);
        sum(&mut self.retry_after_waits, retry_after_waits);
        // The least of those known: a shard without a wait has none.
        self.retry_after_wait_ms_min = match (self.retry_after_wait_ms_min, retry_after_wait_ms_min)
        {
            (Some(a), Some(b)) => Some(a.min(*b)),
            (a, b) => a.or(*b),
        };
        Ok(())
    }
}

impl Merge for Outcomes {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let Outcomes {
            hit,
            miss,
            stale,
            waited,
            fallback,
            error,
            rejected,
            ok,
            timed_out,
            l1_hit,
            retry_after,
        } = o;
        sum(&mut self.hit, hit);
        sum(&mut self.miss, miss);
        sum(&mut self.stale, stale);
        sum(&mut self.waited, waited);
        sum(&mut self.fallback, fallback);
        sum(&mut self.error, error);
        sum(&mut self.rejected, rejected);
        sum(&mut self.ok, ok);
        sum(&mut self.timed_out, timed_out);
        sum(&mut self.l1_hit, l1_hit);
        sum(&mut self.retry_after, retry_after);
        Ok(())
    }
}

impl Merge for DbFigures {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let DbFigures {
            calls,
            calls_server,
            calls_server_note,
            calls_server_read,
            statement_errors,
            statement_timeouts,
            pool_timeouts,
            connect_errors,
            limit_refusals,
            breaker_refusals,
            rate_refusals,
            rate_fallback_ms,
            rewarm_calls,
            rewarm_runs,
            warmup_calls,
            peak_concurrent,
            peak_in_flight,
            peak_active_sampled,
            peak_key_herd,
            redundant_loads,
            by_cause,
            herd_model,
            ledger_peak_key_herd,
            ledger_redundant_loads,
            statement_ms_mean,
            pool_wait_ms_mean,
            pool_busy,
            background_refreshes,
            refreshes_skipped,
            early_recomputes,
            early_lead_ms_mean,
            fail_safe,
            fail_safe_throttled,
            soft_timeouts,
            soft_timeout_write_backs,
            eager_refreshes,
            race_pushes,
            heavy_query_ms,
            seeded_bytes,
            writes,
            writes_server,
            write_errors,
            write_latency_ms,
        } = o;
        // Means first: they are weighed by the counts before those are summed.
        let (mine, theirs) = (self.calls.value().unwrap_or(0), calls.value().unwrap_or(0));
        weighted_mean(&mut self.statement_ms_mean, mine, statement_ms_mean, theirs);
        weighted_mean(&mut self.pool_wait_ms_mean, mine, pool_wait_ms_mean, theirs);
        weighted_mean(
            &mut self.early_lead_ms_mean,
            self.early_recomputes,
            early_lead_ms_mean,
            *early_recomputes,
        );
        // A shard whose DB calls are unknown leaves the sum unknown.
        sum_known(&mut self.calls, calls);
        // The server's own count is read once, for every shard, by shard 0.
        recomputed(&mut self.calls_server, calls_server);
        recomputed(&mut self.calls_server_note, calls_server_note);
        recomputed(&mut self.calls_server_read, calls_server_read);
        sum(&mut self.statement_errors, statement_errors);
        sum(&mut self.statement_timeouts, statement_timeouts);
        sum(&mut self.pool_timeouts, pool_timeouts);
        sum(&mut self.connect_errors, connect_errors);
        sum(&mut self.limit_refusals, limit_refusals);
        sum(&mut self.breaker_refusals, breaker_refusals);
        sum(&mut self.rate_refusals, rate_refusals);
        // Shards fall back on their own: the longest any did (spells of two are not one).
        max(&mut self.rate_fallback_ms, rate_fallback_ms);
        sum(&mut self.rewarm_calls, rewarm_calls);
        // Each shard runs the job on its own instances' share of the keys, on one schedule.
        max(&mut self.rewarm_runs, rewarm_runs);
        sum(&mut self.warmup_calls, warmup_calls);
        // Peaks of different processes happen at different moments: their sum bounds the
        // run's (the merge's notes say so).
        sum(&mut self.peak_concurrent, peak_concurrent);
        sum_known(&mut self.peak_in_flight, peak_in_flight);
        // An app under test's (never sharded).
        same(&mut self.peak_active_sampled, peak_active_sampled);
        // A herd spans processes: no shard's own count sees another's loads (the ledger's
        // figures stand in for them).
        recomputed(&mut self.peak_key_herd, peak_key_herd);
        recomputed(&mut self.redundant_loads, redundant_loads);
        // Each call has one cause in its shard: the sums still add up to the calls.
        sum_known_by(&mut self.by_cause, by_cause, |a, b| a.merge(b))?;
        recomputed(&mut self.herd_model, herd_model);
        recomputed(&mut self.ledger_peak_key_herd, ledger_peak_key_herd);
        recomputed(&mut self.ledger_redundant_loads, ledger_redundant_loads);
        // Weighed by the shards' instances, which the run holds.
        by_parent(&mut self.pool_busy, pool_busy);
        sum(&mut self.background_refreshes, background_refreshes);
        sum(&mut self.refreshes_skipped, refreshes_skipped);
        sum(&mut self.early_recomputes, early_recomputes);
        sum(&mut self.fail_safe, fail_safe);
        sum(&mut self.fail_safe_throttled, fail_safe_throttled);
        sum(&mut self.soft_timeouts, soft_timeouts);
        sum(&mut self.soft_timeout_write_backs, soft_timeout_write_backs);
        sum(&mut self.eager_refreshes, eager_refreshes);
        sum(&mut self.race_pushes, race_pushes);
        // Measured once on the idle server, by the shard that set up.
        first(&mut self.heavy_query_ms, heavy_query_ms);
        first(&mut self.seeded_bytes, seeded_bytes);
        // Writes are refused with shards (one process must see every commit).
        sum(&mut self.writes, writes);
        sum_some(&mut self.writes_server, writes_server);
        sum(&mut self.write_errors, write_errors);
        same(&mut self.write_latency_ms, write_latency_ms);
        Ok(())
    }
}

impl Merge for ByCause {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let ByCause {
            expiry,
            first,
            eviction,
            invalidation,
            herd,
            refresh,
            after_fault,
            other,
        } = o;
        sum(&mut self.expiry, expiry);
        sum(&mut self.first, first);
        sum(&mut self.eviction, eviction);
        sum(&mut self.invalidation, invalidation);
        sum(&mut self.herd, herd);
        sum(&mut self.refresh, refresh);
        sum(&mut self.after_fault, after_fault);
        sum(&mut self.other, other);
        Ok(())
    }
}

impl Merge for RedisFigures {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let RedisFigures {
            keyspace_hits,
            keyspace_misses,
            keyspace_hit_rate,
            note,
            errors,
            timeouts,
            cold_misses,
            negative_hits,
            expiries,
            oom_errors,
            value_mismatches,
            evicted_keys,
            memory,
            nodes,
            hottest_node_share,
            moved,
            ask,
        } = o;
        // INFO is read once for the whole run, by shard 0.
        recomputed(&mut self.keyspace_hits, keyspace_hits);
        recomputed(&mut self.keyspace_misses, keyspace_misses);
        recomputed(&mut self.keyspace_hit_rate, keyspace_hit_rate);
        recomputed(&mut self.note, note);
        sum(&mut self.errors, errors);
        sum(&mut self.timeouts, timeouts);
        sum(&mut self.cold_misses, cold_misses);
        sum(&mut self.negative_hits, negative_hits);
        sum(&mut self.expiries, expiries);
        sum(&mut self.oom_errors, oom_errors);
        sum_some(&mut self.value_mismatches, value_mismatches);
        // The server's own figures, the same server for every shard: shard 0's reading.
        first(&mut self.evicted_keys, evicted_keys);
        first(&mut self.memory, memory);
        first(&mut self.nodes, nodes);
        first(&mut self.hottest_node_share, hottest_node_share);
        first(&mut self.moved, moved);
        first(&mut self.ask, ask);
        Ok(())
    }
}

impl Merge for LockFigures {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let LockFigures {
            acquired,
            contended,
            timeouts,
            lost,
            unavailable,
            extended,
            unkept,
            lease_ms_max,
        } = o;
        sum(&mut self.acquired, acquired);
        sum(&mut self.contended, contended);
        sum(&mut self.timeouts, timeouts);
        sum(&mut self.lost, lost);
        sum(&mut self.unavailable, unavailable);
        sum(&mut self.extended, extended);
        sum(&mut self.unkept, unkept);
        max(&mut self.lease_ms_max, lease_ms_max);
        Ok(())
    }
}

impl Merge for Generator {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let Generator {
            max_dispatch_lag_ms,
            dispatch_lag_ms,
            instances,
            key_digest,
            key_digest_draws,
            cpu_seconds,
            cpu_per_request_us,
            cpu_utilization,
            cores,
            peak_rss_mib,
        } = o;
        max(&mut self.max_dispatch_lag_ms, max_dispatch_lag_ms);
        // Each shard's percentiles are of its own requests: the merged run's are at most the
        // worst shard's, which is what a bound on the precision needs. A shard without them
        // (closed loop, an older file) leaves the merged run's unknown.
        self.dispatch_lag_ms = match (self.dispatch_lag_ms, dispatch_lag_ms) {
            (Some(a), Some(b)) => Some(DispatchLag {
                p50: a.p50.max(b.p50),
                p99: a.p99.max(b.p99),
                max: a.max.max(b.max),
            }),
            _ => None,
        };
        sum(&mut self.instances, instances);
        // Open loop: every shard draws the whole key stream, so their digests are the run's;
        // closed loop: each runs its own clients' streams, and the merged result has none.
        if self.key_digest != *key_digest {
            self.key_digest = String::new();
            self.key_digest_draws = 0;
        }
        same(&mut self.key_digest_draws, key_digest_draws);
        // Utilization is weighed by the cores it is a share of, before they are summed.
        let busy =
            self.cpu_utilization * f64::from(self.cores) + cpu_utilization * f64::from(*cores);
        sum(&mut self.cores, cores);
        self.cpu_utilization = busy / f64::from(self.cores.max(1));
        sum(&mut self.cpu_seconds, cpu_seconds);
        recomputed(&mut self.cpu_per_request_us, cpu_per_request_us);
        max(&mut self.peak_rss_mib, peak_rss_mib);
        Ok(())
    }
}

impl Merge for Consistency {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let Consistency {
            stale_reads,
            stale_read_ratio,
            staleness_ms,
            keys_written,
            divergent_keys,
            writes_probed,
            writes_left_wrong,
            writes_left_wrong_ratio,
            writes_unprobed,
            divergent_ms,
            stale_sets_refused,
            invalidation_failures,
            note,
        } = o;
        sum(&mut self.stale_reads, stale_reads);
        // Over the run's completed requests, which the run holds.
        by_parent(&mut self.stale_read_ratio, stale_read_ratio);
        staleness_ms_merge(&mut self.staleness_ms, staleness_ms);
        sum(&mut self.keys_written, keys_written);
        sum_known(&mut self.divergent_keys, divergent_keys);
        sum(&mut self.writes_probed, writes_probed);
        sum(&mut self.writes_left_wrong, writes_left_wrong);
        recomputed(&mut self.writes_left_wrong_ratio, writes_left_wrong_ratio);
        self.writes_left_wrong_ratio = if self.writes_probed == 0 {
            0.0
        } else {
            self.writes_left_wrong as f64 / self.writes_probed as f64
        };
        sum(&mut self.writes_unprobed, writes_unprobed);
        sum(&mut self.divergent_ms, divergent_ms);
        sum(&mut self.stale_sets_refused, stale_sets_refused);
        sum(&mut self.invalidation_failures, invalidation_failures);
        first(&mut self.note, note);
        Ok(())
    }
}

/// Percentiles of separate processes: the worst shard's bound the run's.
fn staleness_ms_merge(a: &mut Staleness, b: &Staleness) {
    let Staleness { p50, p99, max: m } = b;
    max(&mut a.p50, p50);
    max(&mut a.p99, p99);
    max(&mut a.max, m);
}

impl Merge for Bucket {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let Bucket {
            t_ms,
            requests,
            db_calls,
            pool_wait_ms,
            hits,
            stale,
            errors,
            rejected,
            p99_ms,
            redis_up,
            postgres_up,
            breaker_open,
            stale_reads,
            writes,
            goodput,
            retries,
            partial,
            cost,
        } = o;
        // Placed on the wall clock by the run, which knows both shards' starts.
        by_parent(&mut self.t_ms, t_ms);
        let mut wait = Some(self.pool_wait_ms);
        weighted_mean(&mut wait, self.db_calls, &Some(*pool_wait_ms), *db_calls);
        self.pool_wait_ms = wait.unwrap_or(0.0);
        sum(&mut self.requests, requests);
        sum(&mut self.db_calls, db_calls);
        sum(&mut self.hits, hits);
        sum(&mut self.stale, stale);
        sum(&mut self.errors, errors);
        sum(&mut self.rejected, rejected);
        // Buckets keep no histogram: the highest shard's p99 bounds the bucket's.
        max(&mut self.p99_ms, p99_ms);
        all(&mut self.redis_up, redis_up);
        all(&mut self.postgres_up, postgres_up);
        any(&mut self.breaker_open, breaker_open);
        sum(&mut self.stale_reads, stale_reads);
        sum(&mut self.writes, writes);
        sum(&mut self.goodput, goodput);
        sum(&mut self.retries, retries);
        any(&mut self.partial, partial);
        self.cost.add(cost);
        Ok(())
    }
}

fn decode(s: &str, what: &str) -> Result<Histogram<u64>> {
    decode_histogram(s).map_err(|e| anyhow!("{what}: {e:#}"))
}

/// Two encoded histograms as one, losslessly.
fn add_encoded(a: &mut String, b: &str, what: &str) -> Result<()> {
    let mut h = decode(a, what)?;
    h.add(decode(b, what)?)
        .map_err(|e| anyhow!("merging {what}s: {e:?}"))?;
    *a = encode_histogram(&h);
    Ok(())
}

impl Merge for Histograms {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let Histograms {
            encoding,
            latency_us,
            service_us,
            by_outcome_us,
        } = o;
        same(&mut self.encoding, encoding);
        add_encoded(&mut self.latency_us, latency_us, "latency histogram")?;
        add_encoded(&mut self.service_us, service_us, "service histogram")?;
        for (k, v) in by_outcome_us {
            match self.by_outcome_us.get_mut(k) {
                Some(acc) => add_encoded(acc, v, "per-outcome histogram")?,
                None => {
                    decode(v, "per-outcome histogram")?;
                    self.by_outcome_us.insert(k.clone(), v.clone());
                }
            }
        }
        Ok(())
    }
}

impl Merge for CostFigures {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let CostFigures {
            redis_read_ms,
            load_ms,
            write_back_ms,
            break_even_hit_rate,
            load_ms_from,
            run_load_ms,
            redis_reads,
            loads,
            write_backs,
            undisturbed,
            hit_rate,
        } = o;
        weighted_mean(
            &mut self.redis_read_ms,
            self.redis_reads,
            redis_read_ms,
            *redis_reads,
        );
        weighted_mean(&mut self.run_load_ms, self.loads, run_load_ms, *loads);
        weighted_mean(
            &mut self.write_back_ms,
            self.write_backs,
            write_back_ms,
            *write_backs,
        );
        sum(&mut self.redis_reads, redis_reads);
        sum(&mut self.loads, loads);
        sum(&mut self.write_backs, write_backs);
        // A shard's L is its own run's: the merged run's is the shards' run_load_ms.
        recomputed(&mut self.load_ms, load_ms);
        recomputed(&mut self.load_ms_from, load_ms_from);
        recomputed(&mut self.break_even_hit_rate, break_even_hit_rate);
        // A run with a fault: read again from the merged timeline once every shard is in.
        recomputed(&mut self.undisturbed, undisturbed);
        recomputed(&mut self.hit_rate, hit_rate);
        self.load_ms = self.run_load_ms;
        self.load_ms_from = THIS_RUN.to_string();
        self.break_even_hit_rate = break_even(self.redis_read_ms, self.load_ms, self.write_back_ms);
        Ok(())
    }
}

impl Merge for L1Figures {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let L1Figures {
            hits,
            hit_rate,
            redis_hit_rate,
            evictions,
            invalidations_received,
            flushes,
            spoiled,
            stale_reads,
        } = o;
        sum(&mut self.hits, hits);
        // Shares of the run's completed requests, which the run holds.
        by_parent(&mut self.hit_rate, hit_rate);
        by_parent(&mut self.redis_hit_rate, redis_hit_rate);
        sum(&mut self.evictions, evictions);
        sum(&mut self.invalidations_received, invalidations_received);
        sum(&mut self.flushes, flushes);
        sum(&mut self.spoiled, spoiled);
        sum(&mut self.stale_reads, stale_reads);
        Ok(())
    }
}

impl Merge for ShardFigures {
    fn merge(&mut self, o: &Self) -> Result<()> {
        let ShardFigures {
            index,
            count,
            run_id,
            start_at_ms,
            set_up,
            executed_faults,
            whole_run,
        } = o;
        // Which shard a result is: dropped from the merged result (see `merged`).
        by_parent(&mut self.index, index);
        same(&mut self.count, count);
        same(&mut self.run_id, run_id);
        same(&mut self.start_at_ms, start_at_ms);
        any(&mut self.set_up, set_up);
        any(&mut self.executed_faults, executed_faults);
        // Only shard 0 reads the whole run's figures.
        if self.whole_run.is_none() {
            self.whole_run.clone_from(whole_run);
        }
        Ok(())
    }
}
