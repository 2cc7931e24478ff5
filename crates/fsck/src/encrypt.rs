//! Encrypted inodes (the encrypt feature, fscrypt), checked as e2fsck's
//! encrypted_files.c and pass 2 check them. The checker has no keys: names and contents
//! stay ciphertext, and what is checked is structure. An inode with the ENCRYPT flag
//! needs an encryption context (xattr index 9, name "c"): without one the flag is cleared
//! (PR_1_MISSING_ENCRYPTION_XATTR), a corrupt one clears the inode
//! (PR_1_CORRUPT_ENCRYPTION_XATTR). The context's policy (version, modes, flags, key:
//! the context without its nonce) is numbered; in an encrypted directory every entry
//! but `.` and `..` must have a name of at least one cipher block (16 bytes) and, when
//! it names a file, directory or symlink, that inode must be encrypted by the same
//! policy (PR_2_BAD_ENCRYPTED_NAME, PR_2_UNENCRYPTED_FILE,
//! PR_2_INCONSISTENT_ENCRYPTION_POLICY: the entry is cleared).

use crate::ctx::{Ctx, Worker};
use crate::problem::{Code, Problem};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use usfs_ext4::format::features::incompat;
use usfs_ext4::walk::xattr::{Entry, Value, XattrIssue, XattrVisitor};
use usfs_ext4::walk::{self, Mode};

/// The namespace index of the encryption context.
const INDEX_ENCRYPTION: u8 = 9;
/// Size of a v1 context (version, modes, flags, 8-byte key descriptor, 16-byte nonce).
const V1_SIZE: usize = 28;
/// Size of a v2 context (version, modes, flags, 4 reserved, 16-byte key identifier,
/// 16-byte nonce).
const V2_SIZE: usize = 40;
/// The nonce ending each context (not part of the policy).
const NONCE: usize = 16;
/// Shortest encrypted name: one cipher block.
pub(crate) const MIN_NAME: usize = 16;

/// An inode's encryption policy as pass 2 compares them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Policy {
    /// A context of a version e2fsck does not know (all such count as one policy).
    Unrecognized,
    /// Policy number n (equal policies, equal numbers).
    Known(u32),
}

/// The encryption policies of the inodes pass 1 found encrypted, shared by the workers.
#[derive(Default)]
pub(crate) struct Policies {
    /// Some inode was recorded (the lock is taken only then: pass 2 asks for every
    /// directory block).
    any: AtomicBool,
    inner: Mutex<Table>,
}

/// [`Policies`]' contents.
#[derive(Default)]
struct Table {
    /// Each distinct policy (its bytes), numbered by position.
    known: Vec<Vec<u8>>,
    /// The policy of each encrypted inode.
    of: HashMap<u32, Policy>,
}

impl Policies {
    /// The policy of inode `ino` (None: not encrypted, as far as pass 1 found).
    pub(crate) fn of(&self, ino: u32) -> Option<Policy> {
        // (An inode's record precedes the queueing of its blocks and every later check.)
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        self.inner.lock().expect("policies").of.get(&ino).copied()
    }

    /// Records inode `ino`'s policy, given its context's bytes (the policy part).
    fn record(&self, ino: u32, policy: Option<&[u8]>) {
        let mut t = self.inner.lock().expect("policies");
        let p = match policy {
            None => Policy::Unrecognized,
            Some(bytes) => match t.known.iter().position(|k| k == bytes) {
                Some(i) => Policy::Known(i as u32),
                None => {
                    t.known.push(bytes.to_vec());
                    Policy::Known(t.known.len() as u32 - 1)
                }
            },
        };
        t.of.insert(ino, p);
        self.any.store(true, Ordering::Release);
    }
}

/// What an encryption context holds, as e2fsck's fscrypt_context_to_policy reads it.
enum Context<'a> {
    /// The policy: the context without its nonce.
    Policy(&'a [u8]),
    /// A version e2fsck does not know.
    Unrecognized,
    /// Empty, version 0, or the wrong size for its version.
    Corrupt,
}

/// What the encryption context `value` holds.
fn context(value: &[u8]) -> Context<'_> {
    let size = match value.first() {
        None | Some(0) => return Context::Corrupt,
        Some(1) => V1_SIZE,
        Some(2) => V2_SIZE,
        Some(_) => return Context::Unrecognized,
    };
    if value.len() != size {
        return Context::Corrupt;
    }
    Context::Policy(&value[..size - NONCE])
}

/// Pass 1 on inode `ino`, which has the ENCRYPT flag: records its policy, or reports
/// the missing context (the fix clears the flag) or a corrupt one (the fix clears the
/// inode). Returns false when the inode is to be cleared.
pub(crate) fn check_inode(ctx: &Ctx, w: &mut Worker, ino: u32) -> bool {
    let Some(value) = find_context(ctx, w, ino) else {
        w.report(Problem::new(Code::EncryptNoContext, ino.to_string()).with_ino(ino));
        return true;
    };
    match context(&value) {
        Context::Policy(p) => ctx.shared.policies.record(ino, Some(p)),
        Context::Unrecognized => ctx.shared.policies.record(ino, None),
        Context::Corrupt => {
            w.report(Problem::new(Code::EncryptBadContext, ino.to_string()).with_ino(ino));
            return false;
        }
    }
    true
}

/// Collects the encryption context of an attribute walk.
struct Find(Option<Vec<u8>>);

impl<'a> XattrVisitor<'a> for Find {
    fn entry(&mut self, e: Entry<'a>) {
        if let (INDEX_ENCRYPTION, b"c", Value::Here(v)) = (e.index, e.name, e.value) {
            self.0.get_or_insert_with(|| v.to_vec());
        }
    }
    fn issue(&mut self, _: XattrIssue) -> ControlFlow<()> {
        ControlFlow::Continue(())
    }
}

/// The encryption context of inode `ino` (its record in `w.inode`): in-inode attributes
/// first, then its xattr block's, read leniently (e2fsck reads them ignoring checksums).
fn find_context(ctx: &Ctx, w: &Worker, ino: u32) -> Option<Vec<u8>> {
    let cx = crate::pass1::xattr_ctx(ctx, ino);
    let mut found = Find(None);
    let isz = ctx.geo.inode_size as usize;
    if let Some(area) = walk::xattr::ibody(w.inode.bytes(), isz, w.inode.i_extra_isize()) {
        let _ = walk::xattr::scan_entries(area, 0, &cx, Mode::Lenient, &mut found);
    }
    let blk = w
        .inode
        .file_acl_block(ctx.geo.features.has_incompat(incompat::BIT64));
    if found.0.is_none() && blk != 0 && ctx.valid_block(blk) {
        let mut buf = vec![0u8; ctx.geo.block_size as usize];
        if ctx.read_block(blk, &mut buf).is_ok() {
            let _ = walk::xattr::scan_block(&buf, blk, &cx, Mode::Lenient, &mut found);
        }
    }
    found.0
}

/// The problem of an entry (`shown`: how it is named) in encrypted directory `dir`
/// (policy `dir_policy`) that names inode `ino`, pass 1 done, its file type `needs` a
/// policy (a file, directory or symlink), if any.
pub(crate) fn entry_problem(
    ctx: &Ctx,
    dir_policy: Policy,
    ino: u32,
    needs: bool,
    shown: &str,
) -> Option<Problem> {
    match ctx.shared.policies.of(ino) {
        Some(p) if p == dir_policy => None,
        None if !needs => None,
        None => Some(Problem::new(
            Code::EncryptUnencryptedFile,
            format!("{shown} references unencrypted inode {ino}"),
        )),
        Some(_) => Some(Problem::new(
            Code::EncryptPolicyDiffers,
            format!("{shown} references inode {ino}, which has a different encryption policy"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_read_as_e2fsck_reads_them() {
        let mut v1 = vec![1u8, 1, 4, 0];
        v1.extend([7; 8]);
        v1.extend([9; NONCE]);
        assert!(matches!(context(&v1), Context::Policy(p) if p.len() == 12));
        assert!(matches!(context(&v1[..27]), Context::Corrupt));
        let mut v2 = vec![2u8, 1, 4, 0, 0, 0, 0, 0];
        v2.extend([7; 16]);
        v2.extend([9; NONCE]);
        assert!(matches!(context(&v2), Context::Policy(p) if p.len() == 24));
        assert!(matches!(context(&[0u8; 28]), Context::Corrupt));
        assert!(matches!(context(&[]), Context::Corrupt));
        assert!(matches!(context(&[3u8, 1]), Context::Unrecognized));
    }

    #[test]
    fn equal_policies_share_a_number_whatever_the_nonce() {
        let p = Policies::default();
        p.record(12, Some(&[1, 2, 3]));
        p.record(13, Some(&[1, 2, 3]));
        p.record(14, Some(&[1, 2, 4]));
        p.record(15, None);
        assert_eq!(p.of(12), p.of(13));
        assert_ne!(p.of(12), p.of(14));
        assert_eq!(p.of(15), Some(Policy::Unrecognized));
        assert_eq!(p.of(16), None);
    }
}
