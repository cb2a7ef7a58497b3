#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
// BillingCore depends on swift-certificates, which loads CoreFoundation; Swift then counts libc's
// `struct stat` as CoreFoundation's, and MemberImportVisibility wants that module imported here.
#if canImport(CoreFoundation)
import CoreFoundation
#endif
import Foundation

/// Writes export bytes to an open file descriptor, retrying short and interrupted writes.
public struct FileDescriptorWriter: ExportDestination {
    public let descriptor: Int32
    /// What the descriptor is, for error messages.
    public let name: String

    public init(descriptor: Int32, name: String) {
        self.descriptor = descriptor
        self.name = name
    }

    public static let standardOutput = FileDescriptorWriter(descriptor: 1, name: "standard output")

    public func write(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                #if canImport(Glibc)
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                #else
                let written = Darwin.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                #endif
                if written < 0 {
                    if errno == EINTR { continue }
                    throw InvoiceExportError.output(path: name, reason: String(cString: strerror(errno)))
                }
                offset += written
            }
        }
    }
}

/// An export file that appears complete or not at all: bytes go to a temporary file in the same
/// directory (`.NAME.billingd-RANDOM.tmp`), which ``commit()`` fsyncs and moves to `path` and
/// whose directory it then fsyncs. A crash or `kill -9` before that leaves `path` as it was
/// (absent, or the previous complete export) and at worst the hidden temporary file behind.
///
/// Only regular files are written. A FIFO, a device, a socket or a symbolic link at `path` is
/// refused, with or without `overwrite`: a rename would replace it with a regular file (a
/// FIFO's reader would never see the export; `/dev/null` would become a file). Whoever means to
/// feed a pipe or a device writes to standard output instead. An existing regular file is
/// replaced only with `overwrite`; without it, the temporary file is linked to `path`, which
/// fails if anything appeared there meanwhile, so nothing is replaced by surprise (on a file
/// system without hard links, the check comes just before the rename).
public struct AtomicExportFile: Sendable {
    /// The file the export is for.
    public let path: String
    /// The temporary file being written.
    public let temporaryPath: String
    /// Writes into the temporary file.
    public let writer: FileDescriptorWriter
    /// Whether an existing regular file at `path` is replaced.
    public let overwrite: Bool

    /// Creates the temporary file beside `path`. The finished file gets the mode of the file it
    /// replaces, or `0666` less the umask when there is none, as a shell redirection would.
    public static func create(path: String, overwrite: Bool = false) throws(InvoiceExportError) -> AtomicExportFile {
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        let existingMode = try checkTarget(path, overwrite: overwrite)
        var status = stat()
        if stat(directory, &status) != 0 || (status.st_mode & S_IFMT) != S_IFDIR {
            throw .output(path: path, reason: "the directory \(directory) does not exist")
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<16 {
            let random = String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 36)
            let temporaryPath = url.deletingLastPathComponent()
                .appendingPathComponent(".\(url.lastPathComponent).billingd-\(random).tmp").path
            let descriptor = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o666)
            if descriptor < 0 {
                if errno == EEXIST { continue }
                throw .output(path: path, reason: "cannot create a temporary file in \(directory): \(String(cString: strerror(errno)))")
            }
            if let existingMode { _ = fchmod(descriptor, existingMode) }
            return AtomicExportFile(
                path: path, temporaryPath: temporaryPath, writer: FileDescriptorWriter(descriptor: descriptor, name: path),
                overwrite: overwrite)
        }
        throw .output(path: path, reason: "cannot find a free temporary file name in \(directory)")
    }

    /// What is at `path` now, refused unless it is nothing or (with `overwrite`) a regular file;
    /// the permission bits of the file it will replace.
    public static func checkTarget(_ path: String, overwrite: Bool) throws(InvoiceExportError) -> mode_t? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        let kind: String
        switch status.st_mode & S_IFMT {
        case S_IFREG:
            guard overwrite else { throw .outputExists(path: path) }
            return status.st_mode & 0o777  // never set-id bits on a file its runner now owns
        case S_IFDIR: throw .output(path: path, reason: "it is a directory; name a file")
        case S_IFLNK: kind = "a symbolic link"
        case S_IFIFO: kind = "a FIFO"
        case S_IFCHR: kind = "a character device"
        case S_IFBLK: kind = "a block device"
        case S_IFSOCK: kind = "a socket"
        default: kind = "not a regular file"
        }
        throw .output(
            path: path,
            reason: "it is \(kind); --output writes regular files only (to feed a pipe or a device, write to standard output: leave out --output, or give -, and redirect)")
    }

    /// Makes the export durable and visible: fsync, close, move to `path`, fsync the directory.
    public func commit() throws(InvoiceExportError) {
        if fsync(writer.descriptor) != 0 {
            let reason = String(cString: strerror(errno))
            discard()
            throw .output(path: path, reason: "fsync failed: \(reason)")
        }
        if close(writer.descriptor) != 0 {
            let reason = String(cString: strerror(errno))
            unlink(temporaryPath)
            throw .output(path: path, reason: "close failed: \(reason)")
        }
        do {
            try place()
        } catch {
            unlink(temporaryPath)
            throw error
        }
        // The rename itself is durable only once the directory is synced.
        let directory = open(URL(fileURLWithPath: path).deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
    }

    /// Moves the finished temporary file to `path`: linked when nothing may be replaced (the
    /// link fails if anything is there), else renamed over a regular file (checked again now).
    private func place() throws(InvoiceExportError) {
        if !overwrite {
            if link(temporaryPath, path) == 0 {
                unlink(temporaryPath)
                return
            }
            let failure = errno
            if failure == EEXIST { throw .outputExists(path: path) }
            // A file system without hard links: checked just before the rename instead, which
            // leaves a window of a moment for a file appearing there to be replaced.
            guard [EPERM, ENOTSUP, EOPNOTSUPP, EXDEV].contains(failure) else {
                throw .output(path: path, reason: "link failed: \(String(cString: strerror(failure)))")
            }
        }
        _ = try Self.checkTarget(path, overwrite: overwrite)
        if rename(temporaryPath, path) != 0 {
            throw .output(path: path, reason: "rename failed: \(String(cString: strerror(errno)))")
        }
    }

    /// Abandons the export: closes and removes the temporary file; `path` is left untouched.
    public func discard() {
        close(writer.descriptor)
        unlink(temporaryPath)
    }

    /// Writes `bytes` as the whole file, atomically (for the summary JSON).
    public static func write(_ bytes: [UInt8], to path: String, overwrite: Bool = false) throws(InvoiceExportError) {
        let file = try create(path: path, overwrite: overwrite)
        do {
            try file.writer.write(bytes)
        } catch {
            file.discard()
            throw error as? InvoiceExportError ?? .output(path: path, reason: "\(error)")
        }
        try file.commit()
    }
}

