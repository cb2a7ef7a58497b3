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
/// directory (`.NAME.billingd-RANDOM.tmp`), which ``commit()`` fsyncs and renames over `path`
/// and whose directory it then fsyncs. A crash or `kill -9` before that leaves `path` as it was
/// (absent, or the previous complete export) and at worst the hidden temporary file behind.
public struct AtomicExportFile: Sendable {
    /// The file the export is for.
    public let path: String
    /// The temporary file being written.
    public let temporaryPath: String
    /// Writes into the temporary file.
    public let writer: FileDescriptorWriter

    /// Creates the temporary file beside `path`. The finished file gets the mode of the file it
    /// replaces, or `0666` less the umask when there is none, as a shell redirection would.
    public static func create(path: String) throws(InvoiceExportError) -> AtomicExportFile {
        let url = URL(fileURLWithPath: path)
        let directory = url.deletingLastPathComponent().path
        var status = stat()
        if stat(path, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR {
            throw .output(path: path, reason: "it is a directory; name a file")
        }
        let existingMode: mode_t? = stat(path, &status) == 0 ? status.st_mode & 0o7777 : nil
        if stat(directory, &status) != 0 || (status.st_mode & S_IFMT) != S_IFDIR {
            throw .output(path: path, reason: "the directory \(directory) does not exist")
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<16 {
            let random = String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 36)
            let temporaryPath = url.deletingLastPathComponent()
                .appendingPathComponent(".\(url.lastPathComponent).billingd-\(random).tmp").path
            let descriptor = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o666)
            if descriptor < 0 {
                if errno == EEXIST { continue }
                throw .output(path: path, reason: "cannot create a temporary file in \(directory): \(String(cString: strerror(errno)))")
            }
            if let existingMode { _ = fchmod(descriptor, existingMode) }
            return AtomicExportFile(
                path: path, temporaryPath: temporaryPath, writer: FileDescriptorWriter(descriptor: descriptor, name: path))
        }
        throw .output(path: path, reason: "cannot find a free temporary file name in \(directory)")
    }

    /// Makes the export durable and visible: fsync, close, rename over `path`, fsync the directory.
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
        if rename(temporaryPath, path) != 0 {
            let reason = String(cString: strerror(errno))
            unlink(temporaryPath)
            throw .output(path: path, reason: "rename failed: \(reason)")
        }
        // The rename itself is durable only once the directory is synced.
        let directory = open(URL(fileURLWithPath: path).deletingLastPathComponent().path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            close(directory)
        }
    }

    /// Abandons the export: closes and removes the temporary file; `path` is left untouched.
    public func discard() {
        close(writer.descriptor)
        unlink(temporaryPath)
    }

    /// Writes `bytes` as the whole file, atomically (for the summary JSON).
    public static func write(_ bytes: [UInt8], to path: String) throws(InvoiceExportError) {
        let file = try create(path: path)
        do {
            try file.writer.write(bytes)
        } catch {
            file.discard()
            throw error as? InvoiceExportError ?? .output(path: path, reason: "\(error)")
        }
        try file.commit()
    }
}

