//! Reductions over key ranges and over groups of keys, using the reductions stored beside
//! child pointers so that only the nodes at range ends and group boundaries are read.

use std::cmp::Ordering;
use std::sync::Arc;

use super::cursor::Entry;
use super::{partition, too_deep, Bound, Direction, Reduction, TreeSpec, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::file::NodeSource;
use crate::format::{Ptr, Root};
use crate::node::Node;

/// A key range in ascending key order.
pub(crate) struct KeyRange<'a> {
    pub lo: &'a Bound,
    pub hi: &'a Bound,
}

impl KeyRange<'_> {
    /// From a walk's start and end bounds.
    pub fn from_walk<'a>(start: &'a Bound, end: &'a Bound, dir: Direction) -> KeyRange<'a> {
        match dir {
            Direction::Forward => KeyRange { lo: start, hi: end },
            Direction::Backward => KeyRange { lo: end, hi: start },
        }
    }

    fn admits(&self, spec: &TreeSpec, key: &[u8]) -> bool {
        self.above_lo(spec, key) && self.below_hi(spec, key)
    }

    fn above_lo(&self, spec: &TreeSpec, key: &[u8]) -> bool {
        match self.lo {
            Bound::Unbounded => true,
            Bound::Included(b) => spec.cmp(key, b) != Ordering::Less,
            Bound::Excluded(b) => spec.cmp(key, b) == Ordering::Greater,
        }
    }

    fn below_hi(&self, spec: &TreeSpec, key: &[u8]) -> bool {
        match self.hi {
            Bound::Unbounded => true,
            Bound::Included(b) => spec.cmp(key, b) != Ordering::Greater,
            Bound::Excluded(b) => spec.cmp(key, b) == Ordering::Less,
        }
    }

    /// The children of inner `node` that may hold keys of the range, as `first..end`: any
    /// child strictly between the first and the last of them lies wholly inside it.
    fn overlapping(&self, spec: &TreeSpec, node: &Node) -> (usize, usize) {
        let len = node.len();
        let first = partition(len, |i| !self.above_lo(spec, node.key(i)));
        let hi_clear = |k: &[u8]| match self.hi {
            Bound::Unbounded => false,
            Bound::Included(b) | Bound::Excluded(b) => spec.cmp(k, b) != Ordering::Less,
        };
        // Child i lies wholly above the range once child i-1's largest key reaches its end.
        let end = 1 + partition(len - 1, |j| !hi_clear(node.key(j)));
        (first, end.max(first))
    }

    /// How a child whose keys lie in (`after`, `max`] relates to the range.
    fn classify(&self, spec: &TreeSpec, after: Option<&[u8]>, max: &[u8]) -> Overlap {
        if !self.above_lo(spec, max) {
            return Overlap::Below;
        }
        // Every key of the child is greater than `after`.
        let hi_clear = |a: &[u8]| match self.hi {
            Bound::Unbounded => false,
            Bound::Included(b) | Bound::Excluded(b) => spec.cmp(a, b) != Ordering::Less,
        };
        if after.is_some_and(hi_clear) {
            return Overlap::Above;
        }
        let lo_inside = match self.lo {
            Bound::Unbounded => true,
            Bound::Included(b) | Bound::Excluded(b) => {
                after.is_some_and(|a| spec.cmp(a, b) != Ordering::Less)
            }
        };
        if lo_inside && self.below_hi(spec, max) {
            Overlap::Inside
        } else {
            Overlap::Partial
        }
    }
}

enum Overlap {
    Below,
    Above,
    Inside,
    Partial,
}

/// Count and reduction of the entries in `range`.
pub(crate) fn reduce_range<S: NodeSource>(
    src: &S,
    spec: &TreeSpec,
    root: Option<&Root>,
    range: &KeyRange,
) -> Result<Reduction> {
    let mut parts = Parts::default();
    if let Some(root) = root {
        if matches!((range.lo, range.hi), (Bound::Unbounded, Bound::Unbounded)) {
            return Ok(Reduction {
                count: root.count,
                value: root.reduction.clone(),
            });
        }
        reduce_subtree(src, spec, src.node(root.ptr)?, None, range, &mut parts, 0)?;
    }
    parts.finish(spec)
}

/// Reductions of adjacent pieces of a range, combined at the end.
#[derive(Default)]
struct Parts {
    count: u64,
    reds: Vec<Vec<u8>>,
}

impl Parts {
    fn add_entries(&mut self, spec: &TreeSpec, entries: &[(&[u8], &[u8])]) -> Result<()> {
        if !entries.is_empty() {
            self.count += entries.len() as u64;
            self.reds
                .push(spec.reducer.reduce(entries).map_err(Error::Reduce)?);
        }
        Ok(())
    }

    fn finish(mut self, spec: &TreeSpec) -> Result<Reduction> {
        let value = match self.reds.len() {
            0 => spec.reducer.reduce(&[]).map_err(Error::Reduce)?,
            1 => self.reds.pop().expect("one reduction"),
            _ => {
                let reds: Vec<&[u8]> = self.reds.iter().map(Vec::as_slice).collect();
                spec.reducer.rereduce(&reds).map_err(Error::Reduce)?
            }
        };
        Ok(Reduction {
            count: self.count,
            value,
        })
    }
}

fn reduce_subtree<S: NodeSource>(
    src: &S,
    spec: &TreeSpec,
    node: Arc<Node>,
    after: Option<&[u8]>,
    range: &KeyRange,
    parts: &mut Parts,
    depth: usize,
) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(too_deep(Ptr { offset: 0, len: 0 }));
    }
    if node.is_leaf() {
        let entries: Vec<(&[u8], &[u8])> = (0..node.len())
            .map(|i| (node.key(i), node.value(i)))
            .filter(|(k, _)| range.admits(spec, k))
            .collect();
        return parts.add_entries(spec, &entries);
    }
    let (first, end) = range.overlapping(spec, &node);
    let edge = |i: usize, parts: &mut Parts| -> Result<()> {
        let before = if i == 0 { after } else { Some(node.key(i - 1)) };
        match range.classify(spec, before, node.key(i)) {
            Overlap::Below | Overlap::Above => Ok(()),
            Overlap::Inside => {
                parts.count = parts.count.saturating_add(node.child_count(i));
                parts.reds.push(node.child_red(i).to_vec());
                Ok(())
            }
            Overlap::Partial => reduce_subtree(
                src,
                spec,
                node.child(i, src)?,
                before,
                range,
                parts,
                depth + 1,
            ),
        }
    };
    if first >= end {
        return Ok(());
    }
    edge(first, parts)?;
    if end - first > 2 {
        // The children between the two edges lie wholly inside: one rereduce of their
        // stored reductions.
        let middle = first + 1..end - 1;
        let reds: Vec<&[u8]> = middle.clone().map(|c| node.child_red(c)).collect();
        parts
            .reds
            .push(spec.reducer.rereduce(&reds).map_err(Error::Reduce)?);
        parts.count = middle.fold(parts.count, |n, c| n.saturating_add(node.child_count(c)));
    }
    if end - first > 1 {
        edge(end - 1, parts)?;
    }
    Ok(())
}

/// Decides whether two keys belong to the same group. Groups must be contiguous in key order
/// (any key between two keys of a group is in it), as key prefixes are.
pub trait GroupBy {
    /// True if `a` and `b` are in the same group.
    fn same_group(&self, a: &[u8], b: &[u8]) -> bool;
}

impl<F: Fn(&[u8], &[u8]) -> bool> GroupBy for F {
    fn same_group(&self, a: &[u8], b: &[u8]) -> bool {
        self(a, b)
    }
}

/// One group of a grouped reduction: the first entry met in walk order, and the reduction.
#[derive(Debug)]
pub struct Group {
    /// The group's first entry in walk order; the caller derives the group key from it.
    pub first: Entry,
    /// Count and reduction of the group's entries.
    pub reduction: Reduction,
}

/// Walks the groups of `range` in `dir`, calling `emit` for each until it returns false.
pub(crate) fn fold_groups<S: NodeSource>(
    src: &S,
    spec: &TreeSpec,
    root: Option<&Root>,
    range: &KeyRange,
    dir: Direction,
    group_by: &dyn GroupBy,
    emit: &mut dyn FnMut(Group) -> Result<bool>,
) -> Result<()> {
    let Some(root) = root else { return Ok(()) };
    let mut w = GroupWalk {
        src,
        spec,
        range,
        dir,
        group_by,
        emit,
        current: None,
    };
    if w.subtree(src.node(root.ptr)?, None, 0)? {
        w.flush()?;
    }
    Ok(())
}

struct GroupWalk<'a, S> {
    src: &'a S,
    spec: &'a TreeSpec,
    range: &'a KeyRange<'a>,
    dir: Direction,
    group_by: &'a dyn GroupBy,
    emit: &'a mut dyn FnMut(Group) -> Result<bool>,
    current: Option<(Entry, Parts)>,
}

impl<S: NodeSource> GroupWalk<'_, S> {
    /// Walks one subtree; false once the caller asked to stop.
    fn subtree(&mut self, node: Arc<Node>, after: Option<&[u8]>, depth: usize) -> Result<bool> {
        if depth > MAX_DEPTH {
            return Err(too_deep(Ptr { offset: 0, len: 0 }));
        }
        if node.is_leaf() {
            return self.leaf(&node);
        }
        let order: Vec<usize> = match self.dir {
            Direction::Forward => (0..node.len()).collect(),
            Direction::Backward => (0..node.len()).rev().collect(),
        };
        for i in order {
            let before = if i == 0 { after } else { Some(node.key(i - 1)) };
            match (
                self.range.classify(self.spec, before, node.key(i)),
                self.dir,
            ) {
                (Overlap::Below, Direction::Forward) | (Overlap::Above, Direction::Backward) => {
                    continue
                }
                (Overlap::Below, Direction::Backward) | (Overlap::Above, Direction::Forward) => {
                    break
                }
                (Overlap::Inside, _) if self.child_in_current_group(before, node.key(i)) => {
                    let parts = &mut self.current.as_mut().expect("a current group").1;
                    parts.count = parts.count.saturating_add(node.child_count(i));
                    parts.reds.push(node.child_red(i).to_vec());
                }
                _ => {
                    if !self.subtree(node.child(i, self.src)?, before, depth + 1)? {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }

    /// Whether a child with keys in (`before`, `max`] lies wholly in the current group: the
    /// group already holds a key on one side of the child and shares its group with the
    /// child's far end, so by contiguity it holds every key in between.
    fn child_in_current_group(&self, before: Option<&[u8]>, max: &[u8]) -> bool {
        let Some((first, _)) = &self.current else {
            return false;
        };
        match self.dir {
            Direction::Forward => self.group_by.same_group(first.key(), max),
            Direction::Backward => before.is_some_and(|b| self.group_by.same_group(first.key(), b)),
        }
    }

    fn leaf(&mut self, leaf: &Arc<Node>) -> Result<bool> {
        let idxs: Vec<usize> = match self.dir {
            Direction::Forward => (0..leaf.len()).collect(),
            Direction::Backward => (0..leaf.len()).rev().collect(),
        };
        let mut run: Vec<(&[u8], &[u8])> = Vec::new();
        for i in idxs {
            let key = leaf.key(i);
            if !self.range.admits(self.spec, key) {
                continue;
            }
            let same = self
                .current
                .as_ref()
                .is_some_and(|(first, _)| self.group_by.same_group(first.key(), key));
            if !same {
                self.close_run(&mut run)?;
                if !self.flush()? {
                    return Ok(false);
                }
                self.current = Some((Entry::new(leaf.clone(), i), Parts::default()));
            }
            run.push((key, leaf.value(i)));
        }
        self.close_run(&mut run)?;
        Ok(true)
    }

    fn close_run(&mut self, run: &mut Vec<(&[u8], &[u8])>) -> Result<()> {
        if let Some((_, parts)) = self.current.as_mut() {
            parts.add_entries(self.spec, run)?;
        }
        run.clear();
        Ok(())
    }

    /// Emits the current group, if any; false if the caller asked to stop.
    fn flush(&mut self) -> Result<bool> {
        match self.current.take() {
            None => Ok(true),
            Some((first, parts)) => (self.emit)(Group {
                first,
                reduction: parts.finish(self.spec)?,
            }),
        }
    }
}
