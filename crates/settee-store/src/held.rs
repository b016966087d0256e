//! Small modifications held back until their group commits, so that many small updates in
//! one group rewrite each node they share once (one pass over the tree at commit) instead
//! of once per update: the root and the inner nodes above the leaves they touch would
//! otherwise be rebuilt by every update.
//!
//! Held actions are applied, in the order made, before anything needs the tree itself: the
//! commit, a range or reduction inside an update, a large modification, or too many held.
//! Point reads inside updates look at the held actions first.

use std::cmp::Ordering;

use crate::tree::{Action, TreeSpec};

/// A modification of at most this many actions is held; a larger one already rewrites its
/// nodes once for all its keys, and is applied at once (after what its tree holds).
pub(crate) const HOLD_MAX_ACTIONS: usize = 16;

/// At most this many actions are held per tree: point reads inside updates scan them, and
/// a group's worth (64 writers making a few actions each) is what holding is for.
pub(crate) const HOLD_MAX_PER_TREE: usize = 256;

/// What [`Held::undo_to`] restores.
#[derive(Clone, Debug)]
pub(crate) struct HeldMark {
    held: Vec<usize>,
    applied: usize,
}

/// The held actions of every tree.
#[derive(Default)]
pub(crate) struct Held {
    per_tree: Vec<Vec<Action>>,
    /// Held actions applied while an update ran, kept until it ends: if it fails, its
    /// starting tree comes back and so must the actions it had not yet absorbed.
    applied_in_update: Vec<(usize, Vec<Action>)>,
    bytes: u64,
}

impl Held {
    /// Gives back the room the lists kept from their longest.
    pub fn shrink(&mut self) {
        self.per_tree.iter_mut().for_each(Vec::shrink_to_fit);
        self.applied_in_update.shrink_to_fit();
    }

    /// Actions held for `tree`.
    pub fn len(&self, tree: usize) -> usize {
        self.per_tree.get(tree).map_or(0, Vec::len)
    }

    /// Key and value bytes held, for the writer's memory bound.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Holds `actions` for `tree`, after those already held.
    pub fn push(&mut self, tree: usize, actions: &[Action]) {
        if self.per_tree.len() <= tree {
            self.per_tree.resize_with(tree + 1, Vec::new);
        }
        self.bytes += actions.iter().map(action_bytes).sum::<u64>();
        self.per_tree[tree].extend_from_slice(actions);
    }

    /// The newest held action for a key equal to `key` in `spec`'s order, if any.
    pub fn latest(&self, spec: &TreeSpec, tree: usize, key: &[u8]) -> Option<&Action> {
        latest_in(self.per_tree.get(tree)?, spec, key)
    }

    /// Takes `tree`'s held actions to apply them; give them to
    /// [`Held::applied_during_update`] afterwards.
    pub fn take(&mut self, tree: usize) -> Vec<Action> {
        let taken = self
            .per_tree
            .get_mut(tree)
            .map(std::mem::take)
            .unwrap_or_default();
        self.bytes -= taken.iter().map(action_bytes).sum::<u64>();
        taken
    }

    /// Remembers actions applied during the running update, until [`Held::update_done`].
    pub fn applied_during_update(&mut self, tree: usize, actions: Vec<Action>) {
        self.applied_in_update.push((tree, actions));
    }

    /// Where an update (or a part of one) starts from: how many actions each tree holds,
    /// and how many applications of held actions the running update has made so far.
    pub fn mark(&self) -> HeldMark {
        HeldMark {
            held: self.per_tree.iter().map(Vec::len).collect(),
            applied: self.applied_in_update.len(),
        }
    }

    /// The running update succeeded (or there was none): what it applied stays applied.
    pub fn update_done(&mut self) {
        self.applied_in_update.clear();
    }

    /// The running update, or the part of it since `mark`, failed: hold again exactly
    /// what was held at `mark`, the tree being restored to what it was then.
    pub fn undo_to(&mut self, mark: &HeldMark) {
        let applied = self
            .applied_in_update
            .split_off(mark.applied.min(self.applied_in_update.len()));
        for (tree, held) in self.per_tree.iter_mut().enumerate() {
            let before = mark.held.get(tree).copied().unwrap_or(0);
            // The first application of a tree since the mark took everything held then:
            // the actions from before the mark followed by those made after it.
            match applied.iter().find(|(t, _)| *t == tree) {
                Some((_, actions)) => *held = actions[..before.min(actions.len())].to_vec(),
                None => held.truncate(before),
            }
        }
        self.bytes = self.per_tree.iter().flatten().map(action_bytes).sum();
    }

    /// Forgets everything held (the changes since the last commit are dropped).
    pub fn clear(&mut self) {
        self.per_tree.iter_mut().for_each(Vec::clear);
        self.applied_in_update.clear();
        self.bytes = 0;
    }
}

/// The last of `actions` for a key equal to `key` in `spec`'s order, if any.
pub(crate) fn latest_in<'a>(
    actions: &'a [Action],
    spec: &TreeSpec,
    key: &[u8],
) -> Option<&'a Action> {
    actions
        .iter()
        .rev()
        .find(|a| spec.cmp(a.key(), key) == Ordering::Equal)
}

fn action_bytes(a: &Action) -> u64 {
    match a {
        Action::Put(k, v) => (k.len() + v.len()) as u64,
        Action::Delete(k) => k.len() as u64,
    }
}
