//! Building EROFS images (`usfs mkfs.erofs`).
