"""ArduPilot's proximity library, as it reads OBSTACLE_DISTANCE and OBSTACLE_DISTANCE_3D: the
receiving side transcribed from ArduPilot's source, to be fed jetdetect's real packets.

Sources (the newest copy of the proximity code found in the stored public repositories is the
fork peterbarker/ardupilot @78a47f2c; ArduPilot/ardupilot's own stored copies are older):
  [P]  libraries/AP_Proximity/AP_Proximity_MAV.cpp @78a47f2c
  [B]  libraries/AP_Proximity/AP_Proximity_Boundary_3D.cpp @78a47f2c (and its .h:
       PROXIMITY_NUM_SECTORS 8, PROXIMITY_NUM_LAYERS 5, PROXIMITY_MIDDLE_LAYER 2,
       PROXIMITY_PITCH_WIDTH_DEG 30, PROXIMITY_SECTOR_WIDTH_DEG 45, PROXIMITY_FACE_RESET_MS 1000;
       Face() is invalid: layer = sector = UINT8_MAX)
  [F]  libraries/AP_Proximity/AP_Proximity.cpp: get_status() is the (primary) instance's
       status; handle_msg passes every message to every instance
  [V]  libraries/AC_Avoidance/AC_Avoid.cpp, adjust_velocity_proximity: returns at once unless
       the proximity status is Good (4.1-4.5; the newest copy asks get_obstacle_count())
  [K]  ArduCopter/AP_Arming.cpp, AP_Arming_Copter::proximity_checks: fails with "Proximity
       <deg> deg, <m>m" when the closest object of the middle and upper layers is within
       0.6 m; AP_Arming::proximity_checks before it fails on a sensor that is not Good
       ("PRX1: No Data")

Left out: the low-pass filter on face distances (PRX_FILT; it delays, it does not decide which
face holds what), ignore_reading() (PRXn_IGN_* zones and the ground check; none are set here),
the object-avoidance database, DISTANCE_SENSOR, PRXn_YAW_CORR / PRXn_ORIENT (0). The model is
one proximity instance, PRX1_TYPE = 2 (MAVLink).

Beyond ArduPilot's own state, each face carries `stamp`: which frame the value it holds came
from (OBSTACLE_DISTANCE's time_usec, OBSTACLE_DISTANCE_3D's time_boot_ms), so the oracle can
tell a stale face from a fresh one.
"""

import math
import struct

PROXIMITY_MAV_TIMEOUT_MS = 500  # [P] 27
PROXIMITY_TIMESTAMP_MSG_TIMEOUT_MS = 50  # [P] 28
NUM_SECTORS, NUM_LAYERS, MIDDLE_LAYER = 8, 5, 2  # [B] .h
SECTOR_WIDTH_DEG, PITCH_WIDTH_DEG = 45.0, 30.0  # [B] .h
PROXIMITY_FACE_RESET_MS = 1000  # [B] .h
PROXIMITY_BOUNDARY_3D_TIMEOUT_MS = 750  # [B] check_face_timeout's period
MAV_FRAME_BODY_FRD = 12


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def wrap_360(a):  # AP_Math wrap_360: fmodf, then into [0, 360)
    r = math.fmod(f32(a), 360.0)
    return f32(r + 360.0 if r < 0 else r)


def wrap_180(a):
    r = wrap_360(a)
    return f32(r - 360.0 if r > 180.0 else r)


def get_face(pitch, yaw):
    """[B] get_face(pitch, yaw)."""
    sector = int(f32(wrap_360(f32(yaw + SECTOR_WIDTH_DEG * 0.5)) / 45.0))
    pitch_limited = min(max(f32(pitch), -75.0), 74.9)
    layer = int(f32(f32(pitch_limited + 75.0) / PITCH_WIDTH_DEG))
    return (layer, sector)


def valid(face):
    return face[0] < NUM_LAYERS and face[1] < NUM_SECTORS


class Boundary:
    """[B] AP_Proximity_Boundary_3D, the shared boundary avoidance reads."""

    def __init__(self):
        self.valid = [[False] * NUM_SECTORS for _ in range(NUM_LAYERS)]
        self.distance = [[0.0] * NUM_SECTORS for _ in range(NUM_LAYERS)]
        self.yaw = [[0.0] * NUM_SECTORS for _ in range(NUM_LAYERS)]
        self.pitch = [[0.0] * NUM_SECTORS for _ in range(NUM_LAYERS)]
        self.last_update_ms = [[0] * NUM_SECTORS for _ in range(NUM_LAYERS)]
        self.stamp = [[None] * NUM_SECTORS for _ in range(NUM_LAYERS)]
        self.last_check_ms = 0

    def set_face_attributes(self, face, pitch, yaw, distance, now_ms, stamp):
        """[B] set_face_attributes (one instance: the other-instance rule never applies)."""
        if not valid(face):
            return
        layer, sector = face
        self.yaw[layer][sector] = yaw
        self.pitch[layer][sector] = pitch
        self.distance[layer][sector] = distance
        self.valid[layer][sector] = True
        self.last_update_ms[layer][sector] = now_ms  # [B] set_filtered_distance
        self.stamp[layer][sector] = stamp

    def reset(self):
        """[B] reset(): marks all distances invalid."""
        for layer in range(NUM_LAYERS):
            for sector in range(NUM_SECTORS):
                self.valid[layer][sector] = False

    def reset_face(self, face):
        """[B] reset_face()."""
        if valid(face) and self.valid[face[0]][face[1]]:
            self.valid[face[0]][face[1]] = False

    def check_face_timeout(self, now_ms):
        """[B] check_face_timeout(): every 750 ms, faces not updated for 1 s go invalid."""
        if now_ms - self.last_check_ms < PROXIMITY_BOUNDARY_3D_TIMEOUT_MS:
            return
        self.last_check_ms = now_ms
        for layer in range(NUM_LAYERS):
            for sector in range(NUM_SECTORS):
                if self.valid[layer][sector] and now_ms - self.last_update_ms[layer][sector] > PROXIMITY_FACE_RESET_MS:
                    self.valid[layer][sector] = False

    def closest_object(self):
        """[B] get_closest_object(): middle layer and up (used by the pre-arm check)."""
        best = None
        for layer in range(MIDDLE_LAYER, NUM_LAYERS):
            for sector in range(NUM_SECTORS):
                if self.valid[layer][sector] and (best is None or self.distance[layer][sector] < best[1]):
                    best = (self.yaw[layer][sector], self.distance[layer][sector])
        return best


class TempBoundary:
    """[B] AP_Proximity_Temp_Boundary: a batch of 3D obstacles, nearest per face."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.d = {}

    def add_distance(self, face, pitch, yaw, distance, stamp):
        if valid(face) and (face not in self.d or distance < self.d[face][0]):
            self.d[face] = (distance, pitch, yaw, stamp)

    def update_3d_boundary(self, boundary, now_ms):
        """Sets every face the batch holds; faces it does not hold keep what they had."""
        for face, (distance, pitch, yaw, stamp) in self.d.items():
            boundary.set_face_attributes(face, pitch, yaw, distance, now_ms, stamp)
        return list(self.d.items())


class ArduPilot:
    def __init__(self):
        self.boundary = Boundary()  # the frontend's (shared) boundary
        self.temp = TempBoundary()
        self.last_update_ms = 0
        self.last_msg_stamp = 0
        self.status = "NoData"
        self.distance_min = 0.0
        self.distance_max = 0.0
        # what the oracle looks at
        self.pushes = []  # (now_ms, [(face, (distance, pitch, yaw, stamp))]): 3D batches landing
        self.od_faces = []  # (face, yaw, distance) the last OBSTACLE_DISTANCE set

    def update(self, now_ms):
        """[P] 31-40 update(): NoData once no message came for 500 ms; [B] check_face_timeout."""
        if self.last_update_ms == 0 or now_ms - self.last_update_ms > PROXIMITY_MAV_TIMEOUT_MS:
            self.status = "NoData"
        else:
            self.status = "Good"
        self.boundary.check_face_timeout(now_ms)

    def handle_obstacle_distance(self, m, now_ms):
        """[P] 120-212 handle_obstacle_distance_msg."""
        if f32(m.increment_f) != 0.0:  # [P] 127: !is_zero(increment_f)
            increment = f32(m.increment_f)
        elif m.increment != 0:  # [P] 130
            increment = float(m.increment)
        else:
            return  # [P] 135
        total = int(min(f32(f32(360.0 / abs(increment)) + 0.5), 72))  # [P] 138
        self.distance_min = m.min_distance * 0.01  # [P] 141
        self.distance_max = m.max_distance * 0.01  # [P] 142
        self.last_update_ms = now_ms  # [P] 143
        yaw_correction = wrap_360(0.0 + f32(m.angle_offset))  # [P] 146-147, PRX1_YAW_CORR = 0
        face = (255, 255)  # [P] 157: Face(), invalid
        face_distance, face_yaw, face_valid = float("inf"), 0.0, False  # [P] 158-160
        self.boundary.reset()  # [P] 163: every face, whoever filled it
        self.od_faces = []
        stamp = ("OD", m.time_usec)
        for j in range(total):  # [P] 166
            d = m.distances[j]  # [P] 167
            dist_m = f32(d * 0.01)  # [P] 168
            mid_angle = wrap_360(f32(f32(j * increment) + yaw_correction))  # [P] 169
            if d == 0 or d == 65535 or d < m.min_distance or d > m.max_distance:  # [P] 171-173
                continue
            latest = get_face(0.0, mid_angle)  # [P] 179
            if latest != face:  # [P] 180
                if face_valid:  # [P] 182
                    self._set_od(face, face_yaw, face_distance, now_ms, stamp)  # [P] 183
                else:
                    self.boundary.reset_face(face)  # [P] 185
                face = latest  # [P] 188
                face_valid = False  # [P] 189
            if not face_valid or dist_m < face_distance:  # [P] 193
                face_yaw, face_distance, face_valid = mid_angle, dist_m, True  # [P] 194-196
        if face_valid:  # [P] 206
            self._set_od(face, face_yaw, face_distance, now_ms, stamp)  # [P] 207
        else:
            self.boundary.reset_face(face)  # [P] 209

    def _set_od(self, face, yaw, distance, now_ms, stamp):
        self.boundary.set_face_attributes(face, 0.0, yaw, distance, now_ms, stamp)
        self.od_faces.append((face, yaw, distance))

    def handle_obstacle_distance_3d(self, m, now_ms):
        """[P] 215-274 handle_obstacle_distance_3d_msg."""
        previous_sys_time = self.last_update_ms  # [P] 220
        self.last_update_ms = now_ms  # [P] 221
        time_diff = now_ms - previous_sys_time  # [P] 224
        previous_stamp = self.last_msg_stamp  # [P] 226
        self.last_msg_stamp = m.time_boot_ms  # [P] 227
        if m.frame != MAV_FRAME_BODY_FRD:  # [P] 229
            return
        if previous_stamp != self.last_msg_stamp or time_diff > PROXIMITY_TIMESTAMP_MSG_TIMEOUT_MS:  # [P] 234
            landed = self.temp.update_3d_boundary(self.boundary, now_ms)  # [P] 236
            if landed:
                self.pushes.append((now_ms, landed))
            self.temp.reset()  # [P] 238
        self.distance_min = f32(m.min_distance)  # [P] 241
        self.distance_max = f32(m.max_distance)  # [P] 242
        length = f32(math.sqrt(f32(m.x) ** 2 + f32(m.y) ** 2 + f32(m.z) ** 2))  # [P] 249
        if length < self.distance_min or length > self.distance_max or length == 0.0:  # [P] 250
            return
        x, y, z = f32(m.x), f32(m.y), f32(-m.z)  # [P] 256: FRD to FRU
        yaw = wrap_360(math.degrees(math.atan2(y, x)))  # [P] 259
        pitch = wrap_180(math.degrees(math.pi / 2 - math.atan2(math.hypot(x, y), z)))  # [P] 260
        face = get_face(pitch, yaw)  # [P] 268
        self.temp.add_distance(face, pitch, yaw, length, ("3D", m.time_boot_ms))  # [P] 269

    def handle(self, m, now_ms):
        """[F] handle_msg -> [P] 53-68 handle_msg."""
        t = m.get_type()
        if t == "OBSTACLE_DISTANCE":
            self.handle_obstacle_distance(m, now_ms)
        elif t == "OBSTACLE_DISTANCE_3D":
            self.handle_obstacle_distance_3d(m, now_ms)

    # --- what the vehicle does with it ---------------------------------------------------
    def avoidance_active(self):
        """[V]: proximity avoidance runs only while the status is Good."""
        return self.status == "Good"

    def prearm_failure(self):
        """[K]: why arming is refused, or None."""
        if self.status != "Good":
            return "PRX1: No Data"
        c = self.boundary.closest_object()
        if c is not None and c[1] <= 0.6:
            return f"Proximity {int(c[0])} deg, {c[1]:4.2f}m (want > 0.6m)"
        return None
