//! Hard limits on a tuning run: it stops at the first one reached and returns the best so far.

use std::fmt;
use std::time::Duration;

/// Limits on one tuning run. Unset limits do not apply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Budget {
    /// Most candidates measured in this run (resumed journal entries do not count).
    pub max_trials: Option<usize>,
    /// Most wall time for this run. Checked before each compile batch and each measurement, so a
    /// run can overshoot it by at most one measurement (bounded by the worker's timeout).
    pub max_time: Option<Duration>,
}

impl Budget {
    /// No limits: the search runs until its strategy has nothing left to try.
    pub fn unlimited() -> Budget {
        Budget::default()
    }

    /// At most `n` trials.
    pub fn trials(n: usize) -> Budget {
        Budget { max_trials: Some(n), max_time: None }
    }

    /// At most `d` of wall time.
    pub fn time(d: Duration) -> Budget {
        Budget { max_trials: None, max_time: Some(d) }
    }

    /// Parses the CLI form: comma-separated parts, each `N` or `Ntrials` (trials) or `Ns`, `Nm`,
    /// `Nh`, `Nms` (time), for example `60s`, `200trials`, `5m,500trials`.
    pub fn parse(text: &str) -> Result<Budget, String> {
        let mut budget = Budget::default();
        for part in text.split(',').map(str::trim) {
            let digits_end = part.find(|c: char| !c.is_ascii_digit()).unwrap_or(part.len());
            let (num, unit) = part.split_at(digits_end);
            let n: u64 =
                num.parse().map_err(|_| format!("budget `{part}`: expected a number then a unit (60s, 200trials)"))?;
            if n == 0 {
                return Err(format!("budget `{part}`: a budget of nothing measures nothing; give at least 1"));
            }
            let time = |secs_per: u64| Duration::from_secs(n.saturating_mul(secs_per));
            match unit {
                "" | "trials" | "trial" => budget.max_trials = Some(usize::try_from(n).unwrap_or(usize::MAX)),
                "ms" => budget.max_time = Some(Duration::from_millis(n)),
                "s" => budget.max_time = Some(time(1)),
                "m" | "min" => budget.max_time = Some(time(60)),
                "h" => budget.max_time = Some(time(3600)),
                _ => {
                    return Err(format!("budget `{part}`: unknown unit `{unit}` (use trials, ms, s, m or h)"));
                }
            }
        }
        Ok(budget)
    }
}

/// Why a tuning run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StopReason {
    /// The strategy had nothing left to try (every candidate, or a converged local search).
    Exhausted,
    /// The trial budget was used up.
    TrialBudget,
    /// The time budget was used up.
    TimeBudget,
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StopReason::Exhausted => "search space exhausted",
            StopReason::TrialBudget => "trial budget reached",
            StopReason::TimeBudget => "time budget reached",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_forms() {
        assert_eq!(Budget::parse("60s"), Ok(Budget::time(Duration::from_secs(60))));
        assert_eq!(Budget::parse("200trials"), Ok(Budget::trials(200)));
        assert_eq!(Budget::parse("200"), Ok(Budget::trials(200)));
        assert_eq!(
            Budget::parse("5m, 10trials"),
            Ok(Budget { max_trials: Some(10), max_time: Some(Duration::from_secs(300)) })
        );
        assert_eq!(Budget::parse("250ms"), Ok(Budget::time(Duration::from_millis(250))));
        assert!(Budget::parse("fast").is_err());
        assert!(Budget::parse("10 parsecs").is_err());
        assert!(Budget::parse("").is_err());
        // A budget of nothing used to run one trial anyway.
        assert!(Budget::parse("0trials").is_err());
        assert!(Budget::parse("0s").is_err());
    }
}
