//! Missed slots: the slots of a job's schedule in a range that have no row at all (nothing ran and
//! nothing recorded why), for one job or for every job at once, from when the job was first
//! registered.
//!
//! A listing is a page ([`Admin::missed_page`]): at most `limit` slots (the one page rule,
//! [`check_page`](crate::check_page)) and a [`MissedCursor`] to continue from, across every job as
//! well as for one. One page looks at no more than [`MAX_SCAN_SLOTS`] schedule slots, compared with
//! the store's rows [`CHUNK`] at a time, so the memory a request takes is bounded whatever the range
//! and however many jobs there are.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use slotguard_cron::{DstPolicy, Schedule};

use crate::planned::Planned;
use crate::{Admin, AdminError, MAX_SCAN_SLOTS, check_page, rfc3339, shown};
use slotguard::store::{CalendarOverride, JobRecord};

/// The most schedule slots compared with the store's rows in one read.
pub const CHUNK: usize = 10_000;

/// A slot of the schedule with no row: nothing ran and nothing was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissedSlot {
    /// The slot's instant.
    pub scheduled_at: DateTime<Utc>,
    /// Its wall time in the job's zone.
    pub wall: NaiveDateTime,
    /// Its business date.
    pub business_date: NaiveDate,
}

/// One job's part of a [`MissedPage`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobMissed {
    /// The job.
    pub job: String,
    /// Its missed slots in this page, oldest first; or why they could not be counted (a stored
    /// schedule this version cannot read).
    pub missed: Result<Vec<MissedSlot>, AdminError>,
}

/// Where a listing of missed slots continues: the job, and the instant its scan resumes at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissedCursor {
    /// The job the next page starts with; the jobs before it (in the store's byte order of names)
    /// are done.
    pub job: String,
    /// The instant the job's scan resumes at: for one job's listing, the `from` of the next page.
    pub from: DateTime<Utc>,
}

impl MissedCursor {
    /// The cursor as the HTTP API and the CLI write it: `{job}:{from}`. A job name has no `:`.
    pub fn token(&self) -> String {
        format!("{}:{}", self.job, rfc3339(&self.from))
    }

    /// Reads a cursor written by [`token`](Self::token).
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for the field `cursor`.
    pub fn parse(token: &str) -> Result<MissedCursor, AdminError> {
        let invalid = || AdminError::Invalid {
            field: "cursor",
            problem: format!(
                "`{}` is not a cursor this API answered (`job:instant`)",
                shown(token)
            ),
        };
        let (job, from) = token.split_once(':').ok_or_else(invalid)?;
        let from = DateTime::parse_from_rfc3339(from).map_err(|_| invalid())?;
        Ok(MissedCursor {
            job: job.to_owned(),
            from: from.with_timezone(&Utc),
        })
    }
}

/// A page of missed slots: every job scanned in it, in the store's order, and where to continue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissedPage {
    /// The jobs scanned, each with its missed slots in this page (possibly none).
    pub jobs: Vec<JobMissed>,
    /// Where the next page starts; `None` when the range is done.
    pub next: Option<MissedCursor>,
}

impl MissedPage {
    /// Every missed slot of the page, job by job.
    pub fn slots(&self) -> impl Iterator<Item = &MissedSlot> {
        self.jobs
            .iter()
            .filter_map(|j| j.missed.as_ref().ok())
            .flatten()
    }
}

/// What a [`Admin::missed_page`] asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissedQuery {
    /// One job, or every job.
    pub job: Option<String>,
    /// The start of the range; a job's slots count only from when it was first registered.
    pub from: DateTime<Utc>,
    /// The end of the range (exclusive); now when later.
    pub to: DateTime<Utc>,
    /// Where the previous page ended.
    pub after: Option<MissedCursor>,
    /// At most this many slots (1 to [`MAX_PAGE`](crate::MAX_PAGE)); a job whose slots cannot be
    /// counted takes one place.
    pub limit: usize,
}

/// One job's turn in a page: where its scan starts.
pub(crate) struct Turn {
    pub(crate) record: JobRecord,
    pub(crate) start: DateTime<Utc>,
}

/// One job's slots looked at in one read, and the instant its scan resumes at when the read did
/// not reach the end of the range.
struct Chunk {
    expected: Result<Vec<MissedSlot>, AdminError>,
    resume: Option<DateTime<Utc>>,
}

impl Admin {
    /// Slots of one job's schedule in `[from, to)` (and before now, and from when the job was first
    /// registered) that have no row at all, as one list. A range of more than [`MAX_SCAN_SLOTS`]
    /// slots is refused, so the answer is capped; [`missed_page`](Self::missed_page) pages instead.
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for an empty range, an instant before 1970, or more than
    /// [`MAX_SCAN_SLOTS`] slots; [`AdminError::UnknownJob`]; [`AdminError::Store`].
    pub async fn missed(
        &self,
        job: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<MissedSlot>, AdminError> {
        let record = self.job(job).await?;
        let to = self.settled_end(from, to)?;
        let from = from.max(record.registered_at);
        if from >= to {
            return Ok(Vec::new());
        }
        Ok(self.scan(&record, from, to).await?.1)
    }

    /// The number of schedule slots of a job in `[from, to)`, and those of them with no row; a range
    /// of more than [`MAX_SCAN_SLOTS`] slots is refused.
    pub(super) async fn scan(
        &self,
        record: &JobRecord,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<(usize, Vec<MissedSlot>), AdminError> {
        let overrides = self.overrides_of(std::slice::from_ref(record)).await?;
        let expected = expected_of(record, &overrides, from, to)?;
        let present = self
            .store
            .slot_times(&record.definition.name, from, to)
            .await?;
        Ok((expected.len(), missing(expected, &present)))
    }

    /// A page of missed slots of one job or every job: slots of the schedule in `[from, to)`, before
    /// now and from when each job was first registered, that have no row at all. Follow
    /// [`MissedPage::next`] (as `after`) until it is `None`; a page may hold no slot and still have
    /// a next one, when it looked at [`MAX_SCAN_SLOTS`] slots without finding any.
    ///
    /// # Errors
    /// [`AdminError::Invalid`] for a `limit` out of range, an empty range, an instant before 1970,
    /// or one job's schedule this version cannot read; [`AdminError::UnknownJob`];
    /// [`AdminError::Store`].
    pub async fn missed_page(&self, query: MissedQuery) -> Result<MissedPage, AdminError> {
        let limit = check_page(query.limit)?;
        let to = self.settled_end(query.from, query.to)?;
        if let (Some(job), Some(after)) = (&query.job, &query.after)
            && after.job != *job
        {
            return Err(AdminError::Invalid {
                field: "cursor",
                problem: format!(
                    "it continues the listing of `{}`, not of `{}`",
                    shown(&after.job),
                    shown(job)
                ),
            });
        }
        let mut records = match &query.job {
            Some(job) => vec![self.job(job).await?],
            None => self.store.jobs().await?,
        };
        // The cursor names the next job in byte order, whatever order a store lists them in.
        records.sort_by(|a, b| a.definition.name.cmp(&b.definition.name));
        let after = query.after.as_ref();
        let turns: Vec<Turn> = records
            .into_iter()
            .filter(|r| after.is_none_or(|c| r.definition.name >= c.job))
            .map(|record| {
                let resumed = after
                    .filter(|c| c.job == record.definition.name)
                    .map(|c| c.from);
                let start = query
                    .from
                    .max(record.registered_at)
                    .max(resumed.unwrap_or(query.from));
                Turn { record, start }
            })
            .collect();
        let mut sink = PageSink {
            jobs: Vec::new(),
            room: limit,
        };
        let next = self.walk(turns, to, MAX_SCAN_SLOTS, &mut sink).await?;
        let page = MissedPage {
            jobs: sink.jobs,
            next,
        };
        // One job's slots that cannot be counted are the answer's error, as the job's own.
        match (&query.job, page.jobs.first()) {
            (Some(_), Some(JobMissed { missed: Err(e), .. })) => Err(e.clone()),
            _ => Ok(page),
        }
    }

    /// Answers the turns in order until `sink` is full or `budget` schedule slots were looked at;
    /// where to continue when it stopped before the end.
    pub(crate) async fn walk(
        &self,
        mut turns: Vec<Turn>,
        to: DateTime<Utc>,
        mut budget: usize,
        sink: &mut impl Sink,
    ) -> Result<Option<MissedCursor>, AdminError> {
        let records: Vec<JobRecord> = turns.iter().map(|t| t.record.clone()).collect();
        let overrides = self.overrides_of(&records).await?;
        let mut i = 0;
        while i < turns.len() {
            if sink.full() || budget == 0 {
                return Ok(Some(cursor(&turns[i])));
            }
            let batch = gather(&turns[i..], &overrides, to, budget);
            budget = budget.saturating_sub(batch.iter().map(Chunk::len).sum());
            let present = self.read(&turns[i..i + batch.len()], &batch, to).await?;
            // Only the last chunk of a read can stop short of `to`; its job goes on next round.
            let done = batch.len() - usize::from(batch.last().is_some_and(|c| c.resume.is_some()));
            for (k, (chunk, present)) in batch.into_iter().zip(present).enumerate() {
                let turn = &mut turns[i + k];
                if sink.full() && chunk.expected.is_err() {
                    return Ok(Some(cursor(turn)));
                }
                let found = chunk.expected.map(|slots| missing(slots, &present));
                if let Some(cut) = sink.take(&turn.record.definition.name, found) {
                    turn.start = cut;
                    return Ok(Some(cursor(turn)));
                }
                if let Some(resume) = chunk.resume {
                    turn.start = resume;
                }
            }
            i += done;
        }
        Ok(None)
    }

    /// The slot instants with a row of each chunk's job: one read for the batch, over the range from
    /// the earliest start to the end of the last chunk.
    async fn read(
        &self,
        turns: &[Turn],
        batch: &[Chunk],
        to: DateTime<Utc>,
    ) -> Result<Vec<Vec<DateTime<Utc>>>, AdminError> {
        let countable: Vec<String> = turns
            .iter()
            .zip(batch)
            .filter(|(_, c)| c.expected.as_ref().is_ok_and(|s| !s.is_empty()))
            .map(|(t, _)| t.record.definition.name.clone())
            .collect();
        let mut rows = if countable.is_empty() {
            Vec::new()
        } else {
            let from = turns.iter().map(|t| t.start).min().unwrap_or(to);
            let end = batch.iter().filter_map(|c| c.resume).min().unwrap_or(to);
            let rows = self.store.slot_times_of(&countable, from, end).await?;
            if rows.len() != countable.len() {
                return Err(slotguard::store::StoreError::rejected(format!(
                    "slot_times_of answered {} lists for {} jobs",
                    rows.len(),
                    countable.len()
                ))
                .into());
            }
            rows
        }
        .into_iter();
        Ok(batch
            .iter()
            .map(|c| match &c.expected {
                Ok(slots) if !slots.is_empty() => rows.next().unwrap_or_default(),
                _ => Vec::new(),
            })
            .collect())
    }

    /// `to`, or now when that is earlier: the end of a range whose slots can be missed. Refused when
    /// the range is empty.
    pub(super) fn settled_end(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, AdminError> {
        if from < DateTime::<Utc>::UNIX_EPOCH {
            return Err(AdminError::Invalid {
                field: "from",
                problem: format!(
                    "{} is before 1970-01-01T00:00:00Z, and instants before 1970 are refused",
                    rfc3339(&from)
                ),
            });
        }
        let to = to.min(self.clock.now());
        if from >= to {
            return Err(AdminError::Invalid {
                field: "range",
                problem: format!(
                    "`from` ({}) must be before `to` and before now ({})",
                    rfc3339(&from),
                    rfc3339(&to)
                ),
            });
        }
        Ok(to)
    }
}

impl Chunk {
    fn len(&self) -> usize {
        self.expected.as_ref().map_or(1, Vec::len)
    }
}

/// Where the page ends when `turn` is next.
fn cursor(turn: &Turn) -> MissedCursor {
    MissedCursor {
        job: turn.record.definition.name.clone(),
        from: turn.start,
    }
}

/// The chunks of one read: the turns whose whole remaining range fits in [`CHUNK`] slots together,
/// or the first turn alone, cut at [`CHUNK`] (or the budget) slots.
fn gather(
    turns: &[Turn],
    overrides: &[CalendarOverride],
    to: DateTime<Utc>,
    budget: usize,
) -> Vec<Chunk> {
    let mut batch = Vec::new();
    let mut taken = 0;
    for turn in turns {
        let cap = CHUNK.min(budget).saturating_sub(taken);
        if cap == 0 {
            break;
        }
        let chunk = chunk_of(&turn.record, overrides, (turn.start, to), cap);
        if chunk.resume.is_some() && !batch.is_empty() {
            break;
        }
        taken += chunk.len();
        let cut = chunk.resume.is_some();
        batch.push(chunk);
        if cut {
            break;
        }
    }
    batch
}

/// Where a walk puts each job's missed slots.
pub(crate) trait Sink {
    /// Whether it takes no more slots.
    fn full(&self) -> bool;

    /// Takes a job's answer; the instant to resume at when the sink filled up before the job's
    /// slots were all in it.
    fn take(
        &mut self,
        job: &str,
        found: Result<Vec<MissedSlot>, AdminError>,
    ) -> Option<DateTime<Utc>>;
}

/// A page: the slots themselves, at most `room` more of them.
struct PageSink {
    jobs: Vec<JobMissed>,
    room: usize,
}

impl Sink for PageSink {
    fn full(&self) -> bool {
        self.room == 0
    }

    fn take(
        &mut self,
        job: &str,
        found: Result<Vec<MissedSlot>, AdminError>,
    ) -> Option<DateTime<Utc>> {
        let mut cut = None;
        let room = self.room;
        let found = found.map(|mut slots| {
            if slots.len() > room {
                cut = Some(slots[room].scheduled_at);
                slots.truncate(room);
            }
            slots
        });
        self.room = room.saturating_sub(found.as_ref().map_or(1, Vec::len));
        match (self.jobs.last_mut(), found) {
            (Some(last), Ok(more)) if last.job == job => {
                if let Ok(slots) = &mut last.missed {
                    slots.extend(more);
                }
            }
            (_, found) => self.jobs.push(JobMissed {
                job: job.to_owned(),
                missed: found,
            }),
        }
        cut
    }
}

/// The schedule a stored definition names, if this version can read it: with its business
/// calendar, which must be a builtin one holding the same dates here (a calendar built in code
/// lives only in the application's processes).
pub(crate) fn schedule_of(record: &JobRecord) -> Option<Schedule> {
    let def = &record.definition;
    let dst: DstPolicy = def.dst.parse().ok()?;
    let schedule = Schedule::parse(&def.cron, &def.zone).ok()?.with_dst(dst);
    match &def.calendar {
        None => Some(schedule),
        Some(calendar) => Some(schedule.with_calendar(calendar.rule()?)),
    }
}

fn unreadable(record: &JobRecord) -> AdminError {
    let why = match &record.definition.calendar {
        Some(calendar) if calendar.rule().is_none() => format!(
            ": its business calendar `{}` is not a builtin one with the same dates here",
            shown(&calendar.name)
        ),
        _ => String::new(),
    };
    AdminError::Invalid {
        field: "job",
        problem: format!(
            "the stored schedule of `{}` cannot be read by this version{why}",
            shown(&record.definition.name)
        ),
    }
}

/// Up to `cap` slots of a stored job's schedule in `[from, to)` (with the operators' `overrides` of
/// its calendar in force at each), and the next one when there are more.
fn chunk_of(
    record: &JobRecord,
    overrides: &[CalendarOverride],
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    cap: usize,
) -> Chunk {
    let Some(schedule) = Planned::of(record, overrides) else {
        return Chunk {
            expected: Err(unreadable(record)),
            resume: None,
        };
    };
    let mut expected = Vec::new();
    let mut resume = None;
    for slot in slots_in(&schedule, from, to) {
        if expected.len() == cap {
            resume = Some(slot.scheduled_at);
            break;
        }
        expected.push(slot);
    }
    Chunk {
        expected: Ok(expected),
        resume,
    }
}

/// The schedule's slots in `[from, to)`, oldest first.
fn slots_in(
    schedule: &Planned,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> impl Iterator<Item = MissedSlot> + '_ {
    schedule
        .slots_after(from - chrono::Duration::seconds(1))
        .skip_while(move |s| s.scheduled_at < from)
        .take_while(move |s| s.scheduled_at < to)
        .map(|slot| MissedSlot {
            scheduled_at: slot.scheduled_at,
            wall: slot.wall,
            business_date: slot.business_date(),
        })
}

/// The slots of a stored job's schedule in `[from, to)`, refusing a range of more than
/// [`MAX_SCAN_SLOTS`].
fn expected_of(
    record: &JobRecord,
    overrides: &[CalendarOverride],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<Vec<MissedSlot>, AdminError> {
    let chunk = chunk_of(record, overrides, (from, to), MAX_SCAN_SLOTS);
    if chunk.resume.is_some() {
        return Err(AdminError::Invalid {
            field: "range",
            problem: format!(
                "it holds more than {MAX_SCAN_SLOTS} slots of the schedule; narrow it"
            ),
        });
    }
    chunk.expected
}

/// Those of `expected` with no instant in `present` (ascending).
fn missing(expected: Vec<MissedSlot>, present: &[DateTime<Utc>]) -> Vec<MissedSlot> {
    expected
        .into_iter()
        .filter(|s| present.binary_search(&s.scheduled_at).is_err())
        .collect()
}
