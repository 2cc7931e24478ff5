//! The problem table: every problem the checker can report, with a stable code, the pass
//! that finds it, whether it leaves the file system in error, its message and the fix a
//! repair would apply. The checks only name problems; wording and severity live here
//! (as in e2fsck's problem.c, whose pass numbering the codes follow: 0x0P_NNNN).

/// The pass a problem belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pass {
    /// Superblock, group descriptors, journal.
    P0,
    /// Inodes, blocks, sizes.
    P1,
    /// Blocks claimed by more than one inode.
    P1B,
    /// Directory structure.
    P2,
    /// Directory connectivity.
    P3,
    /// Reference counts.
    P4,
    /// Group summary information (bitmaps and counts).
    P5,
    /// After pass 5: the quota files.
    P6,
}

impl Pass {
    /// The number e2fsck prints in its pass headings ("1B" for [`Pass::P1B`]).
    pub fn label(self) -> &'static str {
        match self {
            Pass::P0 => "0",
            Pass::P1 => "1",
            Pass::P1B => "1B",
            Pass::P2 => "2",
            Pass::P3 => "3",
            Pass::P4 => "4",
            Pass::P5 => "5",
            Pass::P6 => "6",
        }
    }
}

/// How bad a problem is. As e2fsck under -n: most pass-0 problems (e2fsck marks the
/// file system valid after check_super_block; a bad descriptor checksum among them counts
/// only by what later passes find), lost+found problems and the superblock's free counts
/// do not by themselves make the check fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// The file system is inconsistent: `fsck -n` exits 4.
    Error,
    /// Worth saying, not an inconsistency (e.g. superblock free counts, which the kernel
    /// recomputes): exit status stays 0.
    Info,
}

/// What a repair would do (carried now so that repair is a table lookup later).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fix {
    /// Recompute and store a checksum.
    RecomputeChecksum,
    /// Clear the inode.
    ClearInode,
    /// Set a field to the value found.
    SetField,
    /// Remove the directory entry.
    ClearEntry,
    /// Rebuild the structure (e.g. an htree index).
    Rebuild,
    /// Connect to lost+found.
    Reconnect,
    /// Create the missing object.
    Create,
    /// Copy shared blocks so each owner has its own.
    CloneBlocks,
    /// Rewrite bitmaps and counts from what was found.
    FixSummary,
    /// Move the structure to good blocks.
    Relocate,
}

macro_rules! problems {
    ($( $(#[$m:meta])* $name:ident = $code:literal, $pass:ident, $sev:ident, $fix:ident, $msg:literal; )*) => {
        /// Every problem the checker reports.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code {
            $( $(#[$m])* $name, )*
        }

        impl Code {
            /// The row of the table.
            pub fn def(self) -> &'static ProblemDef {
                match self {
                    $( Code::$name => &ProblemDef { code: $code, name: stringify!($name), pass: Pass::$pass, severity: Severity::$sev, fix: Fix::$fix, message: $msg }, )*
                }
            }

            /// Every code, in table order.
            pub const ALL: &'static [Code] = &[ $( Code::$name, )* ];
        }
    };
}

impl Code {
    /// The word e2fsck asks with before this fix (its table's prompt: "Fix", "Clear",
    /// "Salvage", "Connect to /lost+found" ...; for a problem whose question comes
    /// from another of e2fsck's problems, that one's: pass 1D's "Clone multiply-claimed
    /// blocks" for pass 1B's lines).
    pub fn prompt(self) -> &'static str {
        match self {
            Code::JournalBad
            | Code::HurdFiletype
            | Code::JournalHasJournal
            | Code::FirstMetaBgTooBig
            | Code::InodeBadMode
            | Code::EaInodeValue
            | Code::EaInodeHash
            | Code::ExtentBad
            | Code::ExtentOrder
            | Code::IllegalBlock
            | Code::BadSymlink
            | Code::BadXattrBlock
            | Code::BadXattrInInode
            | Code::ReservedInode
            | Code::BadBlocksIllegal
            | Code::BadBlocksPrimary
            | Code::BadBlocksInodeClear
            | Code::JournalInodeNotClear
            | Code::SpecialFlags
            | Code::SpecialImmutable
            | Code::ZeroLengthDir
            | Code::InlineNoFeature
            | Code::ExtentsNoFeature
            | Code::FastSymlinkExtents
            | Code::BadSpecial
            | Code::EncryptShortName
            | Code::EncryptUnencryptedFile
            | Code::EncryptPolicyDiffers
            | Code::DirBadInode
            | Code::DirUnusedInode
            | Code::DirLinkToDir
            | Code::DirBadBlockInode
            | Code::InodeFaddr
            | Code::BlocksHi
            | Code::FileAclHi
            | Code::DirEntryToRoot
            | Code::LostFoundEncrypted
            | Code::UnattachedZeroLen => "Clear",
            Code::ExtentHeader | Code::InlineJunk | Code::EncryptBadContext => "Clear inode",
            Code::GroupMetadataLocation | Code::BadBlocksMetadata => "Relocate",
            Code::BadInlineData | Code::TooBigDir => "Truncate",
            Code::HtreeBad | Code::HtreeChecksum => "Clear HTree index",
            Code::DirHole | Code::NoRoot => "Allocate",
            Code::UnconnectedDir | Code::UnattachedInode => "Connect to /lost+found",
            Code::ExtentOptimize => "Optimize",
            Code::EncryptNoContext => "Clear flag",
            Code::MultiplyClaimed => "Clone multiply-claimed blocks",
            Code::DirCorruptEntry => "Salvage",
            Code::NoLostFound => "Create",
            Code::LostFoundNotDir => "Unlink",
            _ => "Fix",
        }
    }

    /// Does e2fsck ask before this fix? The ones its table gives no prompt (PROMPT_NONE)
    /// it only announces: they are applied without a question and printed without an
    /// answer.
    pub fn asks(self) -> bool {
        !matches!(
            self,
            Code::JournalClearV2
                | Code::JournalBackup
                | Code::JournalMove
                | Code::DirOptimize
                | Code::GroupMetadataMissing
                | Code::MisalignedCluster
        )
    }

    /// Does applying this fix make a repair's exit status 1 (e2fsck's
    /// E2F_FLAG_PROBLEMS_FIXED)? Not for what e2fsck only announces, but for the V2
    /// journal fields, whose fix sets the flag itself.
    pub fn counts_as_fixed(self) -> bool {
        // (Optimizing an extent tree is PR_NOT_A_FIX.)
        self.asks() && self != Code::ExtentOptimize || self == Code::JournalClearV2
    }

    /// Does applying this fix mark the file system changed (e2fsck's EXT2_FLAG_CHANGED,
    /// without which a run exits 0 and says nothing of a modification, whatever it
    /// fixed)? Not for descriptor checksums: e2fsck sets them in memory, written with
    /// the descriptors at the end, after it has looked at the flag.
    pub fn marks_changed(self) -> bool {
        self != Code::GroupDescChecksum
    }
}

/// One row of the problem table.
#[derive(Debug)]
pub struct ProblemDef {
    /// Stable numeric code: 0x0P_NNNN with P the pass (0x11 for pass 1B).
    pub code: u32,
    /// Stable symbolic name.
    pub name: &'static str,
    /// The pass that finds it.
    pub pass: Pass,
    /// Error or information.
    pub severity: Severity,
    /// What a repair would do.
    pub fix: Fix,
    /// The message; `{}` is replaced by the problem's details.
    pub message: &'static str,
}

problems! {
    /// The superblock checksum is wrong.
    SuperblockChecksum = 0x00_0001, P0, Info, RecomputeChecksum, "Superblock checksum does not match superblock ({})";
    /// A group descriptor checksum is wrong.
    GroupDescChecksum = 0x00_0002, P0, Info, RecomputeChecksum, "One or more block group descriptor checksums are invalid: {}";
    /// A bitmap or inode table lies outside the file system, or over other metadata
    /// (e2fsck's PR_1_*_CONFLICT). (Its values: `found` 1 block bitmap, 2 inode bitmap,
    /// 3 inode table, relocated; `expected` the block over other metadata, whose
    /// contents a relocated inode table keeps, or 0 outside the file system, where it
    /// is zeroed.)
    GroupMetadataLocation = 0x00_0003, P0, Info, Rebuild, "{}";
    /// The primary group descriptors put metadata outside the file system but group 1's
    /// backup copy is sound: the backup is written over the primary. (Its values: the
    /// backup's first block, the primary's.)
    GroupDescBackup = 0x00_000B, P0, Error, Rebuild, "Group descriptors look bad... using backup blocks ({})";
    /// The last group's block bitmap is marked uninitialized (BLOCK_UNINIT), which the
    /// last group may not be (e2fsck's PR_0_BB_UNINIT_LAST): the flag is cleared.
    LastGroupBlockUninit = 0x00_0039, P0, Error, SetField, "Last group block bitmap uninitialized";
    /// itable_unused / flags of a group contradict its counts.
    GroupUnusedInodes = 0x00_0004, P0, Info, SetField, "{}";
    /// The journal inode or the journal superblock is invalid. (Its value `found`: 1
    /// an unusable journal inode, deleted as e2fsck's PR_0_JOURNAL_BAD_INODE deletes it
    /// and made anew once the repair is done; 2 a corrupt journal superblock, not fixed
    /// yet.)
    JournalBad = 0x00_0005, P0, Info, Rebuild, "{}";
    /// Orphan inodes are listed (the file system was not cleanly unmounted).
    OrphanList = 0x00_0006, P0, Info, ClearInode, "{}";
    /// Superblock counts are unusual (recomputed by the kernel; not an error).
    SuperblockCounts = 0x00_0007, P0, Info, FixSummary, "{}";
    /// A quota inode number in the superblock names an impossible inode.
    QuotaInode = 0x00_0008, P0, Error, SetField, "{}";
    /// resize_inode and meta_bg are both on (they do not go together): resize_inode is
    /// turned off, with the reserved GDT blocks, and the resize inode cleared.
    ResizeInodeMetaBg = 0x00_0009, P0, Error, SetField, "Resize_inode and meta_bg features are enabled. Those features are not compatible. Resize inode should be disabled{}";
    /// resize_inode is off but the resize inode maps blocks, or s_reserved_gdt_blocks is
    /// not 0: both are cleared.
    ResizeInodeNotClear = 0x00_000A, P0, Error, SetField, "{}";
    /// The Hurd does not support the filetype feature (e2fsck's
    /// PR_0_HURD_CLEAR_FILETYPE, looked at by a repair only): the fix clears it.
    HurdFiletype = 0x00_000E, P0, Error, SetField, "The Hurd does not support the filetype feature";
    /// has_journal is clear, but the superblock names a journal that loads
    /// (PR_0_JOURNAL_HAS_JOURNAL): the fix clears the superblock's journal fields (the
    /// journal inode is then cleared by pass 1). Information for a check: e2fsck asks
    /// before the check proper, and a "no" there does not count.
    JournalHasJournal = 0x00_0016, P0, Info, SetField, "Superblock has_journal flag is clear, but a journal is present";
    /// meta_bg's first group lies beyond the descriptor blocks
    /// (PR_0_FIRST_META_BG_TOO_BIG): the fix turns meta_bg off. (Information for a
    /// check, as [`Code::JournalHasJournal`].)
    FirstMetaBgTooBig = 0x00_0049, P0, Info, SetField, "First_meta_bg is too big.  ({})";
    /// s_min_extra_isize out of range or not a multiple of 4 (PR_0_BAD_MIN_EXTRA_ISIZE;
    /// values: found, the 32 the fix sets). (Information for a check.)
    MinExtraIsize = 0x00_004D, P0, Info, SetField, "Bad required extra isize in superblock ({})";
    /// s_want_extra_isize likewise (PR_0_BAD_WANT_EXTRA_ISIZE).
    WantExtraIsize = 0x00_004E, P0, Info, SetField, "Bad desired extra isize in superblock ({})";
    /// A V2 journal superblock of an internal journal names more than one user (fields
    /// a V1 journal left, e2fsck's PR_0_CLEAR_V2_JOURNAL; block: the superblock's block):
    /// every field past the V1 superblock is zeroed.
    JournalClearV2 = 0x00_002A, P0, Error, SetField, "Found invalid V2 journal superblock fields (from V1 journal).\nClearing fields beyond the V1 journal superblock...";
    /// The journal lives in a visible file of the root (`/.journal`, `/journal` ...:
    /// tune2fs made it on a mounted ext3), the superblock naming that file's inode, which
    /// has one link (e2fsck's PR_0_MOVE_JOURNAL, made by a repair only, not reported by
    /// a check; detail: the name): the journal moves to inode 8 and the entry goes.
    JournalMove = 0x00_0028, P0, Info, Relocate, "Moving journal from /{} to hidden inode.";
    /// The superblock's copy of the journal inode's map is missing or not the inode's
    /// (e2fsck's PR_0_BACKUP_JNL, made by a repair, not reported by a check): copied.
    JournalBackup = 0x00_002D, P0, Info, SetField, "Backing up journal inode block information.";

    /// An inode's checksum does not match.
    InodeChecksum = 0x01_0001, P1, Error, RecomputeChecksum, "Inode {} passes checks, but checksum does not match inode";
    /// The mode holds no valid file type.
    InodeBadMode = 0x01_0002, P1, Error, ClearInode, "Inode {} has a bad mode";
    /// An in-use inode has a deletion time.
    InodeDtimeSet = 0x01_0003, P1, Error, SetField, "Inode {} is in use, but has dtime set";
    /// A deleted inode has no deletion time.
    InodeZeroDtime = 0x01_0004, P1, Error, SetField, "Deleted inode {} has zero dtime";
    /// An xattr entry names an EA inode out of range, or one without the EA_INODE flag
    /// whose hash does not match (e2fsck's PR_1_ATTR_VALUE_EA_INODE; found: the EA
    /// inode): the in-inode attributes are cleared, or with `block` set the inode lets
    /// go of that xattr block.
    EaInodeValue = 0x01_0083, P1, Error, ClearEntry, "Inode {}";
    /// An xattr entry's hash does not match its EA inode's value hash (e2fsck's
    /// PR_1_ATTR_HASH; found: e_hash): cleared as [`Code::EaInodeValue`].
    EaInodeHash = 0x01_0054, P1, Error, ClearEntry, "Extended attribute in inode {}";
    /// An EA inode an entry validly names lacks the EA_INODE flag (e2fsck's
    /// PR_1_ATTR_SET_EA_INODE_FL; the inode is the EA inode, found: its owner): set.
    EaInodeFlag = 0x01_0086, P1, Error, SetField, "EA inode {} missing EA_INODE flag";
    /// An extent tree whose levels hold fewer entries than they could (e2fsck's pass 1E:
    /// PR_1E_CAN_NARROW_EXTENT_TREE, PR_1E_CAN_COLLAPSE_EXTENT_TREE; found: the level):
    /// rebuilt compactly. Not counted as a fix, not done when preening.
    ExtentOptimize = 0x01_4007, P1, Info, Rebuild, "Inode {}";
    /// Extent header invalid.
    ExtentHeader = 0x01_0005, P1, Error, ClearInode, "Inode {} has a bad extent header";
    /// An extent points outside the file system or over metadata.
    ExtentBad = 0x01_0006, P1, Error, ClearEntry, "Inode {} has an invalid extent";
    /// Extents out of order or overlapping.
    ExtentOrder = 0x01_0007, P1, Error, Rebuild, "Inode {} has out of order extents";
    /// Extent block checksum wrong.
    ExtentChecksum = 0x01_0008, P1, Error, RecomputeChecksum, "Inode {} extent block passes checks, but checksum does not match extent";
    /// A block pointer of a block-mapped inode is invalid.
    IllegalBlock = 0x01_0009, P1, Error, ClearEntry, "Inode {} has illegal block(s)";
    /// An extent-mapped directory whose extent starts past the block after the one
    /// before it (found: its logical block, expected: where it should be): e2fsck's
    /// PR_1_COLLAPSE_DBLOCK, which moves it down in pass 1 so that pass 2 reads no hole.
    /// The fix collapses every gap of the directory's map.
    DirCollapse = 0x01_0072, P1, Error, Rebuild, "Directory inode {}";
    /// A data block on bigalloc that breaks the cluster rule (a logical cluster maps to
    /// one physical cluster, at the same offsets: e2fsck's PR_1_MISALIGNED_CLUSTER);
    /// claimed twice, so that pass 1B settles it (reported in the walk's order, before the
    /// inode's size and block count). Announced, not asked.
    MisalignedCluster = 0x01_0074, P1, Error, CloneBlocks, "Inode {} violates cluster allocation rules.\nWill fix in pass 1B.";
    /// i_blocks disagrees with the blocks found.
    BadIBlocks = 0x01_000A, P1, Error, SetField, "Inode {}";
    /// i_size disagrees with the blocks found.
    BadISize = 0x01_000B, P1, Error, SetField, "Inode {}";
    /// A symlink is malformed.
    BadSymlink = 0x01_000C, P1, Error, ClearInode, "Symlink {} is invalid";
    /// An xattr block is malformed.
    BadXattrBlock = 0x01_000D, P1, Error, ClearEntry, "Inode {} has a bad extended attribute block";
    /// In-inode xattrs are malformed.
    BadXattrInInode = 0x01_000E, P1, Error, ClearEntry, "Inode {} has bad in-inode extended attributes";
    /// An xattr block passes its checks but not its checksum.
    XattrBlockChecksum = 0x01_0018, P1, Error, RecomputeChecksum, "Inode {} extended attribute block passes checks, but checksum does not match";
    /// An xattr block's reference count disagrees with its users.
    XattrRefcount = 0x01_000F, P1, Error, SetField, "Extended attribute block {}";
    /// A flag the inode's type or the features do not allow, or one missing. (Its
    /// values: i_flags, and the flags to clear; 0: the extents flag is to be set.)
    BadFlags = 0x01_0010, P1, Error, SetField, "Inode {}";
    /// A reserved inode is wrong (root not a directory, journal inode bad, ...).
    ReservedInode = 0x01_0011, P1, Error, ClearInode, "{}";
    /// i_extra_isize out of range.
    BadExtraIsize = 0x01_0012, P1, Error, SetField, "Inode {} has an invalid extra size";
    /// The inline-data flag without a `system.data` attribute: the inode is truncated
    /// (size 0, no flag, i_block zeroed).
    BadInlineData = 0x01_0013, P1, Error, SetField, "Inode {}";
    /// The bad-blocks inode lists a block number outside the file system: the pointer
    /// is zeroed (e2fsck's PR_1_BB_ILLEGAL_BLOCK_NUM). (Its values: `block` the map
    /// block holding the pointer, 0 for i_block; `found` the pointer's index there,
    /// `expected` the block it names.)
    BadBlocksIllegal = 0x01_0015, P1, Error, SetField, "{}";
    /// The primary superblock or descriptors are on the bad-blocks list: the pointer
    /// is zeroed, as e2fsck's "Clear?". (Its values as [`Code::BadBlocksIllegal`]'s.)
    BadBlocksPrimary = 0x01_0016, P1, Error, SetField, "{}";
    /// A bitmap is on the bad-blocks list: it is relocated (its values: `found` 1 block
    /// bitmap, 2 inode bitmap; `expected` the bad block).
    BadBlocksMetadata = 0x01_0017, P1, Error, Relocate, "{}";
    /// A group's block or inode bitmap is at block 0 where that block lies in the range
    /// e2fsck accepts for it (first_data_block 0: group 0, or any group with flex_bg):
    /// e2fsck marks it missing without asking and gives it a new block at the end of
    /// pass 1 (PR_1_RELOC_TO, preen may). Values: `found` 1 block bitmap, 2 inode
    /// bitmap; `expected` the new block, the first pass 1 left free in the range e2fsck
    /// searches (set after pass 1, which counts it in use).
    GroupMetadataMissing = 0x01_002A, P1, Info, Relocate, "{}";
    /// The bad-blocks inode itself is unusable: invalid fields (e2fsck's
    /// PR_1_INVALID_BAD_INODE), its own inode-table block on its list
    /// (PR_1_BADBLOCKS_IN_BADBLOCKS) or too many illegal blocks
    /// (PR_1_TOO_MANY_BAD_BLOCKS). Its first 128 bytes are zeroed: the list is empty.
    BadBlocksInodeClear = 0x01_0027, P1, Error, ClearInode, "{}";
    /// i_dtime holds an inode number: the inode was on an orphan list that broke
    /// (e2fsck's PR_1_LOW_DTIME, under PR_1_ORPHAN_LIST_REFUGEES; found: the dtime;
    /// expected: 0 for an inode in use, none for a deleted one, which gets the time now).
    OrphanListRefugee = 0x01_0028, P1, Error, SetField, "Inode {} was part of the orphaned inode list";
    /// Inode 8 holds data but is not the journal (the superblock names none, or
    /// another): e2fsck's PR_1_JOURNAL_INODE_NOT_CLEAR; the record is zeroed, its blocks
    /// left free.
    JournalInodeNotClear = 0x01_0029, P1, Error, ClearInode, "Journal inode is not in use, but contains data";

    /// A device file, FIFO or socket whose data is a directory's (e2fsck's
    /// PR_1_TREAT_AS_DIRECTORY): its mode becomes a directory's.
    TreatAsDirectory = 0x01_0019, P1, Error, SetField, "Inode {} but it looks like it is really a directory";
    /// A device file, FIFO or socket with the extents or inline-data flag (cleared).
    SpecialFlags = 0x01_001A, P1, Error, SetField, "Special (device/socket/fifo) file (inode {}) has extents or inline-data flag set";
    /// A device file, FIFO, socket or symlink with the immutable or append-only flag
    /// (cleared).
    SpecialImmutable = 0x01_001B, P1, Error, SetField, "Special (device/socket/fifo/symlink) file (inode {}) has immutable or append-only flag set";
    /// A device file, FIFO or socket with a size (set to 0).
    SpecialSize = 0x01_001C, P1, Error, SetField, "Special (device/socket/fifo) inode {} has non-zero size";
    /// A directory without a single block (cleared).
    ZeroLengthDir = 0x01_001F, P1, Error, ClearInode, "Inode {} is a zero-length directory";
    /// A directory with blocks past e2fsck's 2^31-byte limit (without large_dir): they
    /// are cleared. (Its values: the first block found past the limit, and the first
    /// logical block the directory may not map.)
    TooBigDir = 0x01_0020, P1, Error, Rebuild, "Inode {} is too big";
    /// A directory block in an uninitialized extent (the extent is marked initialized).
    DirUninitExtent = 0x01_0021, P1, Error, SetField, "Directory inode {} has extent marked uninitialized";
    /// Both the inline-data and the extents flag, and i_block is neither (cleared).
    InlineJunk = 0x01_0022, P1, Error, ClearInode, "Inode {}";
    /// The inline-data flag and a `system.data` attribute, but the feature is off: the
    /// feature is turned on.
    InlineFeature = 0x01_0023, P1, Error, SetField, "Inode {} has inline data, but superblock is missing INLINE_DATA feature";
    /// The inline-data flag without the feature or a `system.data` attribute (cleared).
    InlineNoFeature = 0x01_0024, P1, Error, ClearInode, "Inode {} has INLINE_DATA_FL flag on filesystem without inline data support";
    /// The extents flag and an extent header, but the feature is off: the feature is
    /// turned on.
    ExtentFeature = 0x01_0025, P1, Error, SetField, "Inode {}";
    /// The extents flag without the feature or an extent header (cleared).
    ExtentsNoFeature = 0x01_0026, P1, Error, ClearInode, "Inode {}";
    /// A fast symlink with the extents flag (cleared).
    FastSymlinkExtents = 0x01_001E, P1, Error, SetField, "Fast symlink {} has EXTENT_FL set";
    /// The ENCRYPT flag without an encryption context (xattr index 9 "c"; e2fsck's
    /// PR_1_MISSING_ENCRYPTION_XATTR): the flag is cleared.
    EncryptNoContext = 0x01_008A, P1, Error, SetField, "Inode {} has encrypt flag but no encryption extended attribute";
    /// An encryption context that is empty, version 0 or of the wrong size (e2fsck's
    /// PR_1_CORRUPT_ENCRYPTION_XATTR): the inode is cleared.
    EncryptBadContext = 0x01_008B, P1, Error, ClearInode, "Encrypted inode {} has corrupt encryption extended attribute";
    /// A device file, FIFO or socket whose i_block or flags no such file has (e2fsck's
    /// PR_2_BAD_CHAR_DEV and kin): cleared, with the entries naming it.
    BadSpecial = 0x01_001D, P1, Error, ClearInode, "Inode {}";

    /// Blocks claimed by more than one inode.
    MultiplyClaimed = 0x11_0001, P1B, Error, CloneBlocks, "Multiply-claimed block(s) in inode {}";

    /// An entry of an encrypted directory whose name is shorter than a cipher block
    /// (e2fsck's PR_2_BAD_ENCRYPTED_NAME): cleared.
    EncryptShortName = 0x02_0050, P2, Error, ClearEntry, "Encrypted entry {} is too short";
    /// An entry of an encrypted directory naming an unencrypted file, directory or
    /// symlink (PR_2_UNENCRYPTED_FILE): cleared.
    EncryptUnencryptedFile = 0x02_0051, P2, Error, ClearEntry, "Encrypted entry {}";
    /// An entry of an encrypted directory naming an inode of another policy
    /// (PR_2_INCONSISTENT_ENCRYPTION_POLICY): cleared.
    EncryptPolicyDiffers = 0x02_0052, P2, Error, ClearEntry, "Encrypted entry {}";
    /// Directory block checksum wrong.
    DirBlockChecksum = 0x02_0001, P2, Error, RecomputeChecksum, "Directory inode {}: directory passes checks but fails checksum";
    /// Directory leaf block without a checksum tail.
    DirNoTail = 0x02_0002, P2, Error, Rebuild, "Directory inode {}: directory has no checksum";
    /// A directory entry's rec_len or name_len is invalid.
    DirCorruptEntry = 0x02_0003, P2, Error, ClearEntry, "Directory inode {}: corrupted directory entry";
    /// An entry names an inode number outside the file system.
    DirBadInode = 0x02_0004, P2, Error, ClearEntry, "Entry {} has bad inode #";
    /// An entry names an unused inode.
    DirUnusedInode = 0x02_0005, P2, Error, ClearEntry, "Entry {} has deleted/unused inode";
    /// An entry names an inode past its group's itable_unused (pass 1 did not read it).
    /// (Ahead of the file type in the table, which orders one directory's problems: e2fsck
    /// asks this first.)
    DirInodeInUnusedArea = 0x02_0011, P2, Error, SetField, "Entry {}";
    /// An entry names an inode of an INODE_UNINIT group (pass 1 did not read it).
    DirInodeUninitGroup = 0x02_0012, P2, Error, SetField, "Entry {}";
    /// `.` missing or wrong.
    DirBadDot = 0x02_0006, P2, Error, Create, "{}";
    /// `..` missing or not second.
    DirBadDotDot = 0x02_0007, P2, Error, Create, "{}";
    /// An entry's file type disagrees with the inode.
    DirBadFileType = 0x02_0008, P2, Error, SetField, "Entry {} has an incorrect filetype";
    /// Two entries with the same name.
    DirDuplicateEntry = 0x02_0009, P2, Error, ClearEntry, "Duplicate entry {} found";
    /// A second name for a directory.
    DirLinkToDir = 0x02_000A, P2, Error, ClearEntry, "Entry {} is a link to a directory";
    /// An entry name contains '/' or NUL, or is empty.
    DirBadName = 0x02_000B, P2, Error, SetField, "Entry {} has illegal characters in its name";
    /// htree root/node structure invalid.
    HtreeBad = 0x02_000C, P2, Error, Rebuild, "Problem in HTREE directory inode {}";
    /// dx node checksum wrong.
    HtreeChecksum = 0x02_000D, P2, Error, RecomputeChecksum, "Problem in HTREE directory inode {}: node fails checksum";
    /// An entry names an inode stored in a bad inode-table block.
    DirBadBlockInode = 0x02_0010, P2, Error, ClearEntry, "Entry {} points to an inode located in a bad block";
    /// An inode's obsolete fragment address (i_faddr) is not zero.
    InodeFaddr = 0x02_0013, P2, Error, SetField, "i_faddr {}, should be zero";
    /// i_blocks_hi is set but the huge_file feature is off.
    BlocksHi = 0x02_0014, P2, Error, SetField, "i_blocks_hi {}, should be zero";
    /// i_file_acl_hi is set but the 64bit feature is off.
    FileAclHi = 0x02_0015, P2, Error, SetField, "i_file_acl_hi {}, should be zero";
    /// Files of 2 GiB or more without the large_file feature (e2fsck's
    /// PR_2_FEATURE_LARGE_FILES, with PR_1_FS_REV_LEVEL on a revision 0 file system): the
    /// feature is turned on (and the revision made dynamic).
    LargeFileFeature = 0x02_0033, P2, Error, SetField, "{}";
    /// A hole in a directory.
    /// (Its values: the hole's first logical block, and the block after its end.)
    DirHole = 0x02_000E, P2, Error, Create, "Directory inode {} has an unallocated block";
    /// An entry in a directory names the directory's ancestor root wrongly, or root entry.
    DirEntryToRoot = 0x02_000F, P2, Error, ClearEntry, "Entry {} points to the root inode";

    /// The root inode is missing or not a directory.
    NoRoot = 0x03_0001, P3, Error, Create, "Root inode not allocated";
    /// A directory no entry reaches.
    UnconnectedDir = 0x03_0002, P3, Error, Reconnect, "Unconnected directory inode {}";
    /// `..` names another directory than the parent.
    BadDotDot = 0x03_0003, P3, Error, SetField, "'..' in {}";
    /// No /lost+found.
    NoLostFound = 0x03_0004, P3, Info, Create, "/lost+found not found";
    /// /lost+found is not a directory.
    LostFoundNotDir = 0x03_0005, P3, Info, Create, "/lost+found is not a directory ({})";
    /// `/lost+found` is encrypted (e2fsck's PR_3_LPF_ENCRYPTED): the entry goes and a
    /// new one is made.
    LostFoundEncrypted = 0x03_001B, P3, Error, Create, "/lost+found is encrypted";
    /// A directory of 3 blocks or more without an htree index, on a file system with
    /// dir_index (not /lost+found): a repair rebuilds it as e2fsck's pass 3A does
    /// ("Optimizing directories": indexed, or packed into fewer blocks). Found for a
    /// repair only; not asked, not printed but as pass 3A's heading, not counted as a fix.
    DirOptimize = 0x03_0006, P3, Info, Rebuild, "Optimizing directory {}";

    /// An inode in use that no entry names.
    UnattachedInode = 0x04_0001, P4, Error, Reconnect, "Unattached inode {}";
    /// An inode no entry names that is an empty file or directory (no blocks, no
    /// in-inode xattrs: e2fsck's PR_4_ZERO_LEN_INODE): cleared rather than connected.
    UnattachedZeroLen = 0x04_0004, P4, Error, ClearInode, "Unattached zero-length inode {}";
    /// An inode's link count disagrees with the entries naming it.
    BadRefCount = 0x04_0002, P4, Error, SetField, "Inode {}";
    /// An EA inode's stored reference count (i_ctime high, i_version low) is not the
    /// number of entries naming it (e2fsck's PR_4_EA_INODE_REF_COUNT; found, expected).
    EaInodeRefCount = 0x04_0005, P4, Error, SetField, "Extended attribute inode {}";
    /// A directory has more than 65000 links but the dir_nlink feature is off.
    DirNlinkFeature = 0x04_0003, P4, Error, SetField, "Directory exceeds max links, but no DIR_NLINK feature in superblock";
    /// An indexed directory whose link count is 1 (set when it passed 65000 links)
    /// while it now has fewer (found 1, expected the count): e2fsck's
    /// PR_4_DIR_OVERFLOW_REF_COUNT, found for a repair only (e2fsck -n is silent: not an
    /// error) and set to the count.
    DirOverflowRefCount = 0x04_0006, P4, Error, SetField, "Directory inode {}";

    /// The block bitmap disagrees with the blocks in use.
    BlockBitmapDiff = 0x05_0001, P5, Error, FixSummary, "Block bitmap differences: {}";
    /// The inode bitmap disagrees with the inodes in use.
    InodeBitmapDiff = 0x05_0002, P5, Error, FixSummary, "Inode bitmap differences: {}";
    /// A group's free block count is wrong.
    GroupFreeBlocks = 0x05_0003, P5, Error, FixSummary, "Free blocks count wrong for group #{}";
    /// A group's free inode count is wrong.
    GroupFreeInodes = 0x05_0004, P5, Error, FixSummary, "Free inodes count wrong for group #{}";
    /// A group's directory count is wrong.
    GroupDirs = 0x05_0005, P5, Error, FixSummary, "Directories count wrong for group #{}";
    /// The superblock's free block count is wrong (not an error: the kernel recounts).
    TotalFreeBlocks = 0x05_0006, P5, Info, FixSummary, "Free blocks count wrong ({})";
    /// The superblock's free inode count is wrong (not an error).
    TotalFreeInodes = 0x05_0007, P5, Info, FixSummary, "Free inodes count wrong ({})";
    /// A bitmap checksum is wrong.
    BitmapChecksum = 0x05_0008, P5, Error, RecomputeChecksum, "{}";
    /// The padding at the end of a bitmap is not set.
    BitmapPadding = 0x05_0009, P5, Error, FixSummary, "Padding at end of {} bitmap is not set";
    /// A quota file's usage differs from what was counted, lacks an id, or cannot be
    /// read (e2fsck's PR_6_UPDATE_QUOTAS; found: the quota type; the fix writes the file
    /// anew; its warnings precede the question).
    QuotaUsage = 0x06_0002, P6, Error, Rebuild, "{}";
}

/// Where a directory entry lies: its directory's logical block and the byte offset in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryAt {
    /// Logical block of the directory.
    pub lblk: u32,
    /// Byte offset of the entry in the block.
    pub off: u32,
}

/// The blocks an inode shares with other inodes or the file system's metadata (pass 1B),
/// for the fix that clones them (pass 1D).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claims {
    /// Its multiply-claimed blocks, once per claim the inode makes (its map's order; the
    /// xattr block last).
    pub blocks: Vec<u64>,
    /// Those of them that metadata (superblock and descriptor copies, bitmaps, inode
    /// tables) also occupies.
    pub metadata: Vec<u64>,
    /// Its xattr block, when that is one of them.
    pub xattr_block: Option<u64>,
}

/// One problem found: its code and typed values. 24 bytes: a repair of many holds them
/// all, and the problems found by the thousand (link counts, sizes, i_blocks, dtime)
/// carry only an inode and two values of 32 bits; the rarer values (and wider ones)
/// sit in one box.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Which.
    pub code: Code,
    /// Which of `ino`, `found` and `expected` are set ([`HAS_INO`] ...).
    has: u8,
    /// The inode concerned.
    ino: u32,
    /// The value found on disk, where the fix sets a field (i_size, i_blocks, a link
    /// count), when it fits 32 bits (else in [`Rare::wide`]).
    found: u32,
    /// The value the fix sets it to, when it fits 32 bits (else in [`Rare::wide`]).
    expected: u32,
    /// The block, group, entry, details and claims, when any is set.
    rare: Option<Box<Rare>>,
}

/// `Problem::has` bits.
const HAS_INO: u8 = 1;
const HAS_FOUND: u8 = 2;
const HAS_EXPECTED: u8 = 4;
/// The value found is too wide for `Problem::found`: it is in [`Rare::wide`].
const WIDE_FOUND: u8 = 8;
/// The value expected is too wide for `Problem::expected`: it is in [`Rare::wide`].
const WIDE_EXPECTED: u8 = 16;

/// The values few problems carry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Rare {
    /// The block concerned, if any.
    block: Option<u64>,
    /// The group concerned, if any.
    group: Option<u32>,
    /// The directory entry concerned (its directory is the problem's inode), for entry
    /// fixes.
    entry: Option<EntryAt>,
    /// Details filled into the message.
    detail: Box<str>,
    /// The shared blocks of a multiply-claimed inode.
    claims: Option<Claims>,
    /// The values found and expected when wider than 32 bits (a size of 4 GiB or more).
    wide: (u64, u64),
}

impl Problem {
    /// A problem with details.
    pub fn new(code: Code, detail: impl Into<String>) -> Problem {
        let detail = detail.into();
        let mut p = Problem {
            code,
            has: 0,
            ino: 0,
            found: 0,
            expected: 0,
            rare: None,
        };
        if !detail.is_empty() {
            p.rare_mut().detail = detail.into_boxed_str();
        }
        p
    }

    fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Default::default)
    }

    fn rare(&self) -> Option<&Rare> {
        self.rare.as_deref()
    }

    /// Attaches the directory entry's place.
    pub fn at_entry(mut self, at: EntryAt) -> Problem {
        self.rare_mut().entry = Some(at);
        self
    }

    /// Attaches the value found and the value expected (a field the fix sets).
    pub fn values(self, found: u64, expected: u64) -> Problem {
        self.with_found(Some(found)).with_expected(Some(expected))
    }

    /// Sets (or clears) the value found.
    pub fn with_found(mut self, found: Option<u64>) -> Problem {
        self.set_value(0, found);
        self
    }

    /// Sets (or clears) the value expected.
    pub fn with_expected(mut self, expected: Option<u64>) -> Problem {
        self.set_value(1, expected);
        self
    }

    /// Sets value `which` (0 found, 1 expected): inline when it fits 32 bits, else in
    /// [`Rare::wide`].
    fn set_value(&mut self, which: usize, v: Option<u64>) {
        let (has, wide) = [(HAS_FOUND, WIDE_FOUND), (HAS_EXPECTED, WIDE_EXPECTED)][which];
        self.has &= !(has | wide);
        let x = v.unwrap_or(0);
        let narrow = u32::try_from(x).ok();
        self.has |= if v.is_some() { has } else { 0 } | if narrow.is_none() { wide } else { 0 };
        *[&mut self.found, &mut self.expected][which] = narrow.unwrap_or(0);
        if narrow.is_none() || self.rare.is_some() {
            let r = self.rare_mut();
            *[&mut r.wide.0, &mut r.wide.1][which] = if narrow.is_none() { x } else { 0 };
        }
    }

    /// Attaches the shared blocks of a multiply-claimed inode.
    pub fn with_claims(mut self, c: Claims) -> Problem {
        self.rare_mut().claims = Some(c);
        self
    }

    /// Attaches the inode.
    pub fn with_ino(mut self, ino: u32) -> Problem {
        self.ino = ino;
        self.has |= HAS_INO;
        self
    }

    /// Attaches the block.
    pub fn with_block(mut self, b: u64) -> Problem {
        self.rare_mut().block = Some(b);
        self
    }

    /// Attaches the group.
    pub fn with_group(mut self, g: u32) -> Problem {
        self.rare_mut().group = Some(g);
        self
    }

    /// The inode concerned, if any.
    pub fn ino(&self) -> Option<u32> {
        (self.has & HAS_INO != 0).then_some(self.ino)
    }

    /// The value found on disk, where the fix sets a field.
    pub fn found(&self) -> Option<u64> {
        (self.has & HAS_FOUND != 0).then(|| match self.rare() {
            Some(r) if self.has & WIDE_FOUND != 0 => r.wide.0,
            _ => self.found as u64,
        })
    }

    /// The value the fix sets it to.
    pub fn expected(&self) -> Option<u64> {
        (self.has & HAS_EXPECTED != 0).then(|| match self.rare() {
            Some(r) if self.has & WIDE_EXPECTED != 0 => r.wide.1,
            _ => self.expected as u64,
        })
    }

    /// The block concerned, if any.
    pub fn block(&self) -> Option<u64> {
        self.rare()?.block
    }

    /// The group concerned, if any.
    pub fn group(&self) -> Option<u32> {
        self.rare()?.group
    }

    /// The directory entry concerned (its directory is [`Problem::ino`]).
    pub fn entry(&self) -> Option<EntryAt> {
        self.rare()?.entry
    }

    /// The details given (empty when the message is rendered from the values).
    pub fn detail(&self) -> &str {
        self.rare().map_or("", |r| &r.detail)
    }

    /// The shared blocks of a multiply-claimed inode.
    pub fn claims(&self) -> Option<&Claims> {
        self.rare()?.claims.as_ref()
    }

    /// The message as printed.
    pub fn message(&self) -> String {
        let m = self.code.def().message;
        let rendered = self.detail().is_empty().then(|| self.rendered()).flatten();
        let detail = rendered.as_deref().unwrap_or(self.detail());
        match m.find("{}") {
            Some(i) => format!("{}{}{}", &m[..i], detail, m[i + 2..].replace("{}", "")),
            None if detail.is_empty() => m.to_string(),
            None => format!("{m}: {detail}"),
        }
    }

    /// The details of the problems found by the thousand (link counts, sizes, i_blocks,
    /// dtime, orphans), rendered from their values when the message is made: they carry no text,
    /// which a repair of many holds in memory.
    fn rendered(&self) -> Option<String> {
        let ino = self.ino()?;
        let values = || self.found().zip(self.expected());
        Some(match self.code {
            Code::InodeDtimeSet | Code::OrphanListRefugee => ino.to_string(),
            Code::BadRefCount => {
                let (f, e) = values()?;
                format!("{ino} ref count is {f}, should be {e}")
            }
            Code::DirCollapse => {
                let (f, e) = values()?;
                format!("{ino} block {f} should be at block {e}")
            }
            Code::DirOverflowRefCount => {
                let (_, e) = values()?;
                format!("{ino} ref count set to overflow but could be exact value {e}")
            }
            Code::BadISize => {
                let (f, e) = values()?;
                format!("{ino}, i_size is {f}, should be {e}")
            }
            Code::BadIBlocks => {
                let (f, e) = values()?;
                format!("{ino}, i_blocks is {f}, should be {e}")
            }
            _ => return None,
        })
    }

    /// Sort key: pass, then inode, block, group, code.
    pub fn sort_key(&self) -> (Pass, u32, u64, u32, Code) {
        (
            self.code.def().pass,
            self.ino().unwrap_or(0),
            self.block().unwrap_or(0),
            self.group().unwrap_or(0),
            self.code,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample of e2fsck's prompts (problem.c's table) for the rows they belong to.
    #[test]
    fn prompts_are_e2fscks() {
        for (c, word) in [
            (Code::BadRefCount, "Fix"),
            (Code::DirUnusedInode, "Clear"),
            (Code::DirCorruptEntry, "Salvage"),
            (Code::UnattachedInode, "Connect to /lost+found"),
            (Code::NoLostFound, "Create"),
            (Code::MultiplyClaimed, "Clone multiply-claimed blocks"),
            (Code::ExtentHeader, "Clear inode"),
            (Code::BadInlineData, "Truncate"),
            (Code::DirHole, "Allocate"),
            (Code::GroupMetadataLocation, "Relocate"),
            (Code::HtreeBad, "Clear HTree index"),
            (Code::EncryptNoContext, "Clear flag"),
            (Code::ExtentOptimize, "Optimize"),
            (Code::LostFoundNotDir, "Unlink"),
        ] {
            assert_eq!(c.prompt(), word, "{c:?}");
        }
    }

    #[test]
    fn codes_are_unique_and_match_their_pass() {
        let mut seen = std::collections::HashSet::new();
        for c in Code::ALL {
            let d = c.def();
            assert!(seen.insert(d.code), "duplicate code {:#x}", d.code);
            let pass_of_code = match d.code >> 16 {
                0 => Pass::P0,
                1 => Pass::P1,
                0x11 => Pass::P1B,
                2 => Pass::P2,
                3 => Pass::P3,
                4 => Pass::P4,
                5 => Pass::P5,
                6 => Pass::P6,
                _ => panic!("bad code {:#x}", d.code),
            };
            assert_eq!(pass_of_code, d.pass, "{}", d.name);
        }
    }

    #[test]
    fn a_problem_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Problem>(), 24);
    }

    #[test]
    fn values_wider_than_32_bits_survive() {
        let big = (5u64 << 32) + 7;
        let p = Problem::new(Code::BadISize, "").values(big, 9);
        assert_eq!((p.found(), p.expected()), (Some(big), Some(9)));
        let p = p.values(3, big + 1);
        assert_eq!((p.found(), p.expected()), (Some(3), Some(big + 1)));
        assert_eq!(p.with_found(None).found(), None);
        assert_eq!(Problem::new(Code::BadISize, "").found(), None);
    }

    #[test]
    fn details_rendered_from_values_read_as_e2fsck_words_them() {
        let p = |code| Problem::new(code, "").with_ino(12).values(7, 1);
        assert_eq!(
            p(Code::BadRefCount).message(),
            "Inode 12 ref count is 7, should be 1"
        );
        assert_eq!(
            p(Code::BadISize).message(),
            "Inode 12, i_size is 7, should be 1"
        );
        assert_eq!(
            p(Code::BadIBlocks).message(),
            "Inode 12, i_blocks is 7, should be 1"
        );
        assert_eq!(
            Problem::new(Code::InodeDtimeSet, "").with_ino(12).message(),
            "Inode 12 is in use, but has dtime set"
        );
        assert_eq!(
            Problem::new(Code::OrphanListRefugee, "")
                .with_ino(12)
                .message(),
            "Inode 12 was part of the orphaned inode list"
        );
        // A detail given is used as it is.
        let given = Problem::new(Code::BadRefCount, "3 ref count is 2, should be 1").with_ino(12);
        assert_eq!(given.message(), "Inode 3 ref count is 2, should be 1");
    }
}
