@testable import TodoSyncAPI
import XCTest

/// Which snapshot `Range` headers nginx serves (206, or 200 when it ignores them) and which it
/// would refuse with its own HTML 416: those the responder answers itself, as JSON (issue 34,
/// item 7). The refusals listed were seen from nginx 1.22 with `max_ranges 1`.
final class SnapshotRangeTests: XCTestCase {
    func testRangesNginxServes() {
        for range in ["bytes=0-99", "bytes=0-", "bytes=99-99", "bytes=50-5000", "bytes=-1", "bytes=-100000",
                      "bytes=0-1,5-6", "bytes=0-1,200-", "items=0-5", "nonsense"] {
            XCTAssertTrue(Application.nginxServes(range: range, size: 100), range)
        }
    }

    func testRangesNginxWouldRefuse() {
        for range in ["bytes=abc", "bytes=5-3", "bytes=-", "bytes=99999999999999999999-", "bytes=100-",
                      "bytes=100-200", "bytes=-0", "bytes=", "bytes=1:2", "bytes=0-1,x", "bytes=200-,300-"] {
            XCTAssertFalse(Application.nginxServes(range: range, size: 100), range)
        }
    }

    func testAnEmptyFileHasNoSatisfiableRange() {
        XCTAssertFalse(Application.nginxServes(range: "bytes=0-", size: 0))
        XCTAssertFalse(Application.nginxServes(range: "bytes=-5", size: 0))
    }
}

/// The live route refuses a Last-Event-ID nchan could not parse with the contract's JSON 400
/// (nchan's own is text/plain); the ids nchan writes pass (issue 34, item 7).
final class LiveEventIDTests: XCTestCase {
    func testIdsNchanWritesPass() {
        for id in ["1796655753:0", "1796655753:[0]", "1:-1", " 1796655753:12 "] {
            XCTAssertTrue(Application.isLiveEventID(id), id)
        }
    }

    func testOtherValuesAreRefused() {
        for id in ["1:[[[", "1:0,1", "99999999999999999999999:0", ":1", "1:", "abc", "", "1:0:0", "1:999999",
                   String(repeating: "x", count: 300)] {
            XCTAssertFalse(Application.isLiveEventID(id), id)
        }
    }

    /// A `friends=1` stream multiplexes two channels: one tag each, the event's bracketed, `-` for
    /// a channel without a message yet (docs/FRIENDS.md); a one-tag id is another stream's.
    func testTwoChannelIdsPassOnAFriendsStreamOnly() {
        for id in ["1796664990:[0],-", "1796665043:-,[0]", "1:0,1", "1:[-1],3"] {
            XCTAssertTrue(Application.isLiveEventID(id, channels: 2), id)
            XCTAssertFalse(Application.isLiveEventID(id), id)
        }
        for id in ["1:0", "1:[0]", "1:0,1,2", "1:,0", "1:0,[[", "1:0,"] {
            XCTAssertFalse(Application.isLiveEventID(id, channels: 2), id)
        }
    }
}
