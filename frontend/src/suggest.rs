//! "Did you mean" suggestions: the closest candidate by edit distance.

/// Edit distance (insertions, deletions, substitutions) between two strings, by chars.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Past this many candidates no suggestion is made (it would cost more than it helps).
pub(crate) const MAX_CANDIDATES: usize = 1000;

/// The candidate closest to `name`, if it is close enough to be a likely typo (at most a third of
/// the name's length, and at least one edit, apart). Ties go to the candidate that sorts first.
pub(crate) fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    // Names longer than this are not typos of anything we know; skip the quadratic work.
    const LONGEST: usize = 64;
    let len = name.chars().count();
    if len > LONGEST {
        return None;
    }
    let limit = (len / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for (i, cand) in candidates.into_iter().enumerate() {
        if i >= MAX_CANDIDATES {
            return None;
        }
        let cand_len = cand.chars().count();
        if cand == name || cand_len > LONGEST || cand_len.abs_diff(len) > limit {
            continue;
        }
        let d = distance(name, cand);
        let better = match best {
            None => true,
            Some((bd, bc)) => d < bd || (d == bd && cand < bc),
        };
        if d <= limit && better {
            best = Some((d, cand));
        }
    }
    best.map(|(_, c)| c)
}

/// `Some("did you mean `x`?")` for the closest candidate.
pub(crate) fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    closest(name, candidates).map(|c| format!("did you mean `{c}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("", ""), 0);
        assert_eq!(distance("exp", "exp"), 0);
        assert_eq!(distance("exp", "epx"), 2);
        assert_eq!(distance("sofmax", "softmax"), 1);
        assert_eq!(distance("abc", ""), 3);
    }

    #[test]
    fn closest_picks_a_near_name_only() {
        assert_eq!(closest("sofmax", ["softmax", "gelu"]), Some("softmax"));
        assert_eq!(closest("xyz", ["softmax", "gelu"]), None);
        assert_eq!(closest("f3", ["f32", "f16", "bf16"]), Some("f32"));
        assert_eq!(closest("f64", ["f32", "f16", "bf16"]), None);
        assert_eq!(closest("x", ["x"]), None);
        let many: Vec<String> = (0..=MAX_CANDIDATES).map(|i| format!("v{i}")).collect();
        assert_eq!(closest("v1", many.iter().map(String::as_str)), None);
    }
}
