"""PX4's collision prevention, as it reads OBSTACLE_DISTANCE: the receiving side transcribed
from PX4's source, to be fed jetdetect's real packets.

Sources (PX4/PX4-Autopilot; line numbers are those of the revisions named):
  [R]  src/modules/mavlink/mavlink_receiver.cpp, MavlinkReceiver::handle_message_obstacle_distance
  [C]  src/lib/collision_prevention/CollisionPrevention.cpp, the ObstacleMath revision
       ("Copyright (c) 2018-2024", ObstacleMath.hpp included); its .hpp sets
       BIN_COUNT = 36, BIN_SIZE = 10 (older) or BIN_COUNT = 72 (sizeof distances), BIN_SIZE = 5
       (newest), RANGE_STREAM_TIMEOUT_US = 500 ms, TIMEOUT_HOLD_US = 5 s
  [M]  src/lib/collision_prevention/ObstacleMath.cpp @039e808d
  [A]  src/lib/collision_prevention/CollisionPrevention.cpp @970e500d (v1.14/v1.15): 36 bins of
       INTERNAL_MAP_INCREMENT_DEG = 10, one message sector per bin (msg_index = ceil(...))

Three readers, one class: Px4("obstaclemath", bins=36), Px4("obstaclemath", bins=72) and
Px4("v1.14"). Float arithmetic is float32, as on the autopilot (f32()).

Left out, because jetdetect's messages never reach it: the GLOBAL/LOCAL_NED branch, distance
sensors (DISTANCE_SENSOR), the setpoint shaping itself. What the model keeps is what decides
the map the controller acts on: which bin holds what, when a bin goes stale, and when PX4 stops
or switches to Hold for want of data.

Reading past the 72 distances: [C] reads obstacle.distances[j] for every j < 360 / increment,
and [A] for msg_index up to 360 / increment. Only 72 exist. The model reads what follows the
array in the uORB struct (PX4 orders a message's fields by size: min_distance, max_distance,
then frame and sensor_type as one 16-bit word), then 0 for whatever lies beyond, and records
every such read in `oob_reads`.
"""

import math
import struct

UINT16_MAX = 65535
RANGE_STREAM_TIMEOUT_US = 500_000  # [C] .hpp
TIMEOUT_HOLD_US = 5_000_000  # [C] .hpp
MAV_FRAME_BODY_FRD = 12


def f32(x):
    """x rounded to float32, as PX4 computes."""
    return struct.unpack("f", struct.pack("f", x))[0]


def wrap(x, low, high):
    """matrix::wrap(x, low, high) (PX4 matrix/helper_functions.hpp), in float32."""
    x = f32(x)
    if low <= x < high:
        return x
    r = high - low
    n = math.floor((x - low) / r)
    return f32(x - r * n)


def wrap_360(a):  # [M] ObstacleMath::wrap_360
    return wrap(a, 0.0, 360.0)


def wrap_bin(b, count):  # [M] ObstacleMath::wrap_bin: C++ % keeps the dividend's sign
    w = int(math.fmod(b, count))
    return w + count if w < 0 else w


def get_lower_bound_angle(b, bin_width, angle_offset):  # [M] line 60
    b = wrap_bin(b, int(f32(360.0 / bin_width)))  # [M] 62: 360 / bin_width, an int parameter
    return wrap_360(f32(f32(f32(b * bin_width) + angle_offset) - f32(bin_width / 2.0)))  # [M] 63


class Px4:
    def __init__(self, reader="obstaclemath", bins=36, start_us=0):
        assert reader in ("obstaclemath", "v1.14")
        self.reader = reader
        self.bin_count = 36 if reader == "v1.14" else bins
        self.bin_size = 360 // self.bin_count
        # [C] 52-62 constructor: distances UINT16_MAX, min_distance UINT16_MAX, increment BIN_SIZE
        self.distances = [UINT16_MAX] * 72
        self.map_timestamp = 0
        self.map_min = UINT16_MAX
        self.map_max = 0
        self.map_angle_offset = 0.0  # [A] 80; [C] leaves it at its {} value, 0
        # [A] 84-88 sets them to now; [C] leaves them at their {} value
        self.data_timestamps = [start_us if reader == "v1.14" else 0] * self.bin_count
        self.data_maxranges = [0] * self.bin_count
        # [C] 75-85 is_active(): CP_DIST > 0 from the start
        self.time_activated = start_us
        self.last_timeout_warning = 0
        # what the oracle looks at
        self.oob_reads = []  # (j, value read)
        self.writes = []  # (bin, message sector j, value), for the last message
        self.data_present = False
        self.hold_commanded_at = None
        self.not_moving = False

    # --- the receiver -------------------------------------------------------------------
    def handle_obstacle_distance(self, m, now_us):
        """[R]: the MAVLink message into obstacle_distance_s, stamped on receipt, published;
        [C] 146-160 _updateObstacleMap picks it up in the next control step (run here at once)."""
        o = {
            "timestamp": now_us,  # [R] obstacle_distance.timestamp = hrt_absolute_time()
            "distances": list(m.distances),  # [R] memcpy of the 72
            # [R] increment_f when > 0, else the integer increment
            "increment": f32(m.increment_f) if m.increment_f > 0.0 else float(m.increment),
            "min_distance": m.min_distance,
            "max_distance": m.max_distance,
            "angle_offset": f32(m.angle_offset),
            "frame": m.frame,
            "sensor_type": m.sensor_type,
        }
        # [C] 151: only if not stale and increment > 0
        if now_us - o["timestamp"] < RANGE_STREAM_TIMEOUT_US and o["increment"] > 0.0:
            self.map_timestamp = max(self.map_timestamp, o["timestamp"])  # [C] 153
            self.map_max = max(self.map_max, o["max_distance"])  # [C] 154
            self.map_min = min(self.map_min, o["min_distance"])  # [C] 156
            self.writes = []
            if self.reader == "v1.14":
                self._add_v114(o)
            else:
                self._add_obstaclemath(o)

    def _read(self, o, j):
        """obstacle.distances[j], past the end too (see the module's doc)."""
        if 0 <= j < 72:
            return o["distances"][j]
        after = [o["min_distance"], o["max_distance"], o["frame"] | (o["sensor_type"] << 8)]
        v = after[j - 72] if j - 72 < len(after) else 0
        self.oob_reads.append((j, v))
        return v

    def _add_obstaclemath(self, o):
        """[C] 425-462, the BODY_FRD branch of _addObstacleSensorData."""
        if o["frame"] != MAV_FRAME_BODY_FRD:
            return  # [C] 464-469 logs "unsupported frame"; jetdetect sends BODY_FRD only
        inc = o["increment"]
        for i in range(self.bin_count):  # [C] 428
            j = 0
            while j < f32(360.0 / inc):  # [C] 429: j < 360 / obstacle.increment (float)
                bl = get_lower_bound_angle(i, self.bin_size, self.map_angle_offset)  # [C] 430
                bu = get_lower_bound_angle(i + 1, self.bin_size, self.map_angle_offset)  # [C] 432
                ml = get_lower_bound_angle(j, inc, o["angle_offset"])  # [C] 434
                mu = get_lower_bound_angle(j + 1, inc, o["angle_offset"])  # [C] 435
                if bl > bu:  # [C] 438
                    bl -= 360
                if ml > mu:  # [C] 442
                    ml -= 360
                overlap = (  # [C] 447-450
                    (ml > bl and ml < bu)
                    or (mu > bl and mu < bu)
                    or (ml <= bl and mu >= bu)
                    or (ml >= bl and mu <= bu)
                )
                if overlap:
                    d = self._read(o, j)
                    if d != UINT16_MAX:  # [C] 451
                        if self._enter_data(i, f32(o["max_distance"] * 0.01), f32(d * 0.01)):  # [C] 453
                            self.distances[i] = d  # [C] 454
                            self.data_timestamps[i] = self.map_timestamp  # [C] 455
                            self.data_maxranges[i] = o["max_distance"]  # [C] 456
                            self.writes.append((i, j, d))
                j += 1

    def _add_v114(self, o):
        """[A] 139-157, the BODY_FRD branch of _addObstacleSensorData."""
        if o["frame"] != MAV_FRAME_BODY_FRD:
            return
        factor = f32(1.0 / o["increment"])  # [A] 119
        for i in range(self.bin_count):  # [A] 142
            bin_angle = f32(f32(i * 10) + self.map_angle_offset)  # [A] 143
            j = math.ceil(f32(wrap_360(f32(bin_angle - o["angle_offset"])) * factor))  # [A] 145
            d = self._read(o, j)
            if d != UINT16_MAX:  # [A] 148
                if self._enter_data(i, f32(o["max_distance"] * 0.01), f32(d * 0.01)):  # [A] 150
                    self.distances[i] = d  # [A] 151
                    self.data_timestamps[i] = self.map_timestamp  # [A] 152
                    self.data_maxranges[i] = o["max_distance"]  # [A] 153
                    self.writes.append((i, j, d))

    def _enter_data(self, i, sensor_range, reading):
        """[C] 472-502 _enterData: which reading a bin takes (the same in [A])."""
        range_cm = int(round(100.0 * sensor_range))  # [C] 481 lroundf
        cur, maxr = self.distances[i], self.data_maxranges[i]
        if reading < sensor_range:  # [C] 483
            return (cur < maxr and range_cm <= maxr) or cur >= maxr  # [C] 484-486
        return (cur >= maxr and range_cm >= maxr) or (cur < maxr and range_cm == maxr)  # [C] 492-495

    # --- the controller step ------------------------------------------------------------
    def step(self, now_us):
        """[C] 166-184 _updateObstacleData, then the no-data branch of
        _calculateConstrainedSetpoint [C] 193-209."""
        self.data_present = False  # [C] 168
        for i in range(self.bin_count):  # [C] 170
            if now_us - self.data_timestamps[i] > RANGE_STREAM_TIMEOUT_US:  # [C] 172
                self.distances[i] = UINT16_MAX  # [C] 173
            if self.distances[i] < UINT16_MAX and now_us - self.map_timestamp < RANGE_STREAM_TIMEOUT_US:  # [C] 179-180
                self.data_present = True  # [C] 181
        self.not_moving = not self.data_present  # [C] 193-195: setpoint_accel.setZero()
        if self.not_moving:
            # [C] 198-201: "No obstacle data, not moving", then Hold (DO_SET_MODE Loiter)
            if now_us - self.last_timeout_warning > 1_000_000 and now_us - self.time_activated > 1_000_000:
                if now_us - self.map_timestamp > TIMEOUT_HOLD_US and now_us - self.time_activated > TIMEOUT_HOLD_US:
                    if self.hold_commanded_at is None:
                        self.hold_commanded_at = now_us
                self.last_timeout_warning = now_us  # [C] 205

    def bin_span(self, i):
        """Bin i's azimuths, degrees in [-180, 180): [M] get_lower_bound_angle with the map's
        increment and angle_offset ([C] 430-433; [A] places bin i at i * 10 and reads the one
        message sector there)."""
        lo = get_lower_bound_angle(i, self.bin_size, self.map_angle_offset)
        lo = lo - 360 if lo >= 180 else lo
        return lo, lo + self.bin_size

    def name(self):
        return "PX4 v1.14" if self.reader == "v1.14" else f"PX4 ObstacleMath {self.bin_count} bins"
